"""Sales CRM: companies, contacts, deals through pipeline stages, and logged activities."""

from datetime import date

from fastapi import FastAPI, HTTPException, Query
from pydantic import BaseModel
from sqlalchemy import create_engine, text

DATABASE_URL = "sqlite:///./outputs/databases/crm_1.db"
engine = create_engine(DATABASE_URL, connect_args={"check_same_thread": False})
app = FastAPI(title="CRM API")
CURRENT_USER_ID = 1
STAGES = ("prospecting", "qualification", "proposal", "negotiation", "closed_won", "closed_lost")


def fetch_all(sql: str, **params):
    with engine.connect() as conn:
        return [dict(row._mapping) for row in conn.execute(text(sql), params)]


def fetch_one(sql: str, **params):
    rows = fetch_all(sql, **params)
    return rows[0] if rows else None


def execute(sql: str, **params) -> int:
    with engine.begin() as conn:
        return conn.execute(text(sql), params).lastrowid


def require(table: str, row_id: int, what: str):
    row = fetch_one(f"SELECT * FROM {table} WHERE id = :id", id=row_id)
    if row is None:
        raise HTTPException(status_code=404, detail=f"{what} not found")
    return row


class DealCreate(BaseModel):
    company_id: int
    name: str
    amount: float
    close_date: date
    stage: str = "prospecting"


class StageUpdate(BaseModel):
    stage: str


class ContactCreate(BaseModel):
    company_id: int
    name: str
    email: str
    title: str = ""


class ActivityCreate(BaseModel):
    kind: str
    note: str
    due_date: date | None = None


@app.get("/api/companies/search", operation_id="search_companies", tags=["companies"],
         summary="Find companies by name or industry")
def search_companies(query: str = Query(..., description="Part of a name or industry")):
    pattern = f"%{query}%"
    return {"companies": fetch_all("SELECT * FROM companies WHERE name LIKE :p OR industry LIKE :p ORDER BY name",
                                   p=pattern)}


@app.get("/api/companies/{company_id}", operation_id="get_company", tags=["companies"],
         summary="A company with its contacts and deals")
def get_company(company_id: int):
    company = require("companies", company_id, "Company")
    company["contacts"] = fetch_all("SELECT * FROM contacts WHERE company_id = :c ORDER BY id", c=company_id)
    company["deals"] = fetch_all("SELECT * FROM deals WHERE company_id = :c ORDER BY id", c=company_id)
    return company


@app.get("/api/deals", operation_id="list_deals", tags=["deals"],
         summary="List deals, optionally in one pipeline stage")
def list_deals(stage: str | None = Query(None, description="One of " + ", ".join(STAGES))):
    if stage:
        return {"deals": fetch_all("SELECT * FROM deals WHERE stage = :s ORDER BY id", s=stage)}
    return {"deals": fetch_all("SELECT * FROM deals ORDER BY id")}


@app.get("/api/deals/{deal_id}", operation_id="get_deal", tags=["deals"], summary="A deal with its activities")
def get_deal(deal_id: int):
    deal = require("deals", deal_id, "Deal")
    deal["activities"] = fetch_all("SELECT * FROM activities WHERE deal_id = :d ORDER BY id", d=deal_id)
    return deal


@app.post("/api/deals", operation_id="create_deal", tags=["deals"], summary="Create a deal owned by the current user")
def create_deal(payload: DealCreate):
    require("companies", payload.company_id, "Company")
    if payload.stage not in STAGES:
        raise HTTPException(status_code=422, detail="stage must be one of " + ", ".join(STAGES))
    deal_id = execute("INSERT INTO deals (company_id, name, stage, amount, owner_id, close_date) VALUES "
                      "(:c, :n, :s, :a, :o, :d)", c=payload.company_id, n=payload.name, s=payload.stage,
                      a=payload.amount, o=CURRENT_USER_ID, d=payload.close_date.isoformat())
    return get_deal(deal_id)


@app.put("/api/deals/{deal_id}/stage", operation_id="update_deal_stage", tags=["deals"],
         summary="Move a deal to another pipeline stage")
def update_deal_stage(deal_id: int, payload: StageUpdate):
    require("deals", deal_id, "Deal")
    if payload.stage not in STAGES:
        raise HTTPException(status_code=422, detail="stage must be one of " + ", ".join(STAGES))
    execute("UPDATE deals SET stage = :s WHERE id = :id", s=payload.stage, id=deal_id)
    return get_deal(deal_id)


@app.post("/api/contacts", operation_id="create_contact", tags=["contacts"], summary="Add a contact to a company")
def create_contact(payload: ContactCreate):
    require("companies", payload.company_id, "Company")
    contact_id = execute("INSERT INTO contacts (company_id, name, email, title) VALUES (:c, :n, :e, :t)",
                         c=payload.company_id, n=payload.name, e=payload.email, t=payload.title)
    return fetch_one("SELECT * FROM contacts WHERE id = :id", id=contact_id)


@app.post("/api/deals/{deal_id}/activities", operation_id="log_activity", tags=["activities"],
          summary="Log a call, email or meeting on a deal, optionally with a follow-up date")
def log_activity(deal_id: int, payload: ActivityCreate):
    require("deals", deal_id, "Deal")
    if payload.kind not in ("call", "email", "meeting"):
        raise HTTPException(status_code=422, detail="kind must be call, email or meeting")
    activity_id = execute("INSERT INTO activities (deal_id, kind, note, due_date, author_id) VALUES "
                          "(:d, :k, :n, :due, :u)", d=deal_id, k=payload.kind, n=payload.note,
                          due=payload.due_date.isoformat() if payload.due_date else None, u=CURRENT_USER_ID)
    return fetch_one("SELECT * FROM activities WHERE id = :id", id=activity_id)


if __name__ == "__main__":
    import uvicorn

    uvicorn.run(app, host="127.0.0.1", port=8001)
