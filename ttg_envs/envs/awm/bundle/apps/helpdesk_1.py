"""Helpdesk: tickets, agents and comments for an IT support desk (user 1 is the requester)."""


from fastapi import FastAPI, HTTPException, Query
from pydantic import BaseModel
from sqlalchemy import create_engine, text

DATABASE_URL = "sqlite:///./outputs/databases/helpdesk_1.db"
engine = create_engine(DATABASE_URL, connect_args={"check_same_thread": False})
app = FastAPI(title="Helpdesk API")
CURRENT_USER_ID = 1
NOW = "2024-06-15 09:00:00"


def fetch_all(sql: str, **params):
    with engine.connect() as conn:
        return [dict(row._mapping) for row in conn.execute(text(sql), params)]


def fetch_one(sql: str, **params):
    rows = fetch_all(sql, **params)
    return rows[0] if rows else None


def execute(sql: str, **params) -> int:
    with engine.begin() as conn:
        return conn.execute(text(sql), params).lastrowid


class TicketCreate(BaseModel):
    subject: str
    description: str
    priority: str = "normal"


class StatusUpdate(BaseModel):
    status: str


class Assignment(BaseModel):
    agent_id: int


class CommentCreate(BaseModel):
    body: str
    is_internal: bool = False


@app.get("/api/tickets", operation_id="list_tickets", tags=["tickets"],
         summary="List tickets, optionally filtered by status, priority or assignee, newest first")
def list_tickets(status: str | None = Query(None, description="open, pending, resolved or closed"),
                 priority: str | None = Query(None, description="low, normal, high or urgent"),
                 assignee_id: int | None = Query(None, description="Agent id")):
    sql = "SELECT * FROM tickets WHERE 1=1"
    if status:
        sql += " AND status = :status"
    if priority:
        sql += " AND priority = :priority"
    if assignee_id is not None:
        sql += " AND assignee_id = :assignee_id"
    return {"tickets": fetch_all(sql + " ORDER BY created_at DESC", status=status, priority=priority,
                                 assignee_id=assignee_id)}


@app.get("/api/tickets/search", operation_id="search_tickets", tags=["tickets"],
         summary="Search tickets whose subject or description contains the text")
def search_tickets(query: str = Query(..., description="Text to look for")):
    pattern = f"%{query}%"
    return {"tickets": fetch_all("SELECT * FROM tickets WHERE subject LIKE :p OR description LIKE :p "
                                 "ORDER BY created_at DESC", p=pattern)}


@app.get("/api/tickets/{ticket_id}", operation_id="get_ticket", tags=["tickets"],
         summary="Get one ticket with its comments")
def get_ticket(ticket_id: int):
    ticket = fetch_one("SELECT * FROM tickets WHERE id = :id", id=ticket_id)
    if ticket is None:
        raise HTTPException(status_code=404, detail="Ticket not found")
    ticket["comments"] = fetch_all("SELECT * FROM ticket_comments WHERE ticket_id = :id ORDER BY id", id=ticket_id)
    return ticket


@app.post("/api/tickets", operation_id="create_ticket", tags=["tickets"],
          summary="Open a new ticket as the current user")
def create_ticket(payload: TicketCreate):
    if payload.priority not in ("low", "normal", "high", "urgent"):
        raise HTTPException(status_code=422, detail="priority must be low, normal, high or urgent")
    ticket_id = execute("INSERT INTO tickets (subject, description, status, priority, requester_id, created_at, "
                        "updated_at) VALUES (:s, :d, 'open', :p, :u, :now, :now)", s=payload.subject,
                        d=payload.description, p=payload.priority, u=CURRENT_USER_ID, now=NOW)
    return fetch_one("SELECT * FROM tickets WHERE id = :id", id=ticket_id)


@app.put("/api/tickets/{ticket_id}/status", operation_id="update_ticket_status", tags=["tickets"],
         summary="Change a ticket's status (open, pending, resolved, closed)")
def update_ticket_status(ticket_id: int, payload: StatusUpdate):
    if payload.status not in ("open", "pending", "resolved", "closed"):
        raise HTTPException(status_code=422, detail="status must be open, pending, resolved or closed")
    if fetch_one("SELECT id FROM tickets WHERE id = :id", id=ticket_id) is None:
        raise HTTPException(status_code=404, detail="Ticket not found")
    execute("UPDATE tickets SET status = :s, updated_at = :now WHERE id = :id", s=payload.status, now=NOW, id=ticket_id)
    return fetch_one("SELECT * FROM tickets WHERE id = :id", id=ticket_id)


@app.put("/api/tickets/{ticket_id}/assignee", operation_id="assign_ticket", tags=["tickets"],
         summary="Assign a ticket to an agent")
def assign_ticket(ticket_id: int, payload: Assignment):
    if fetch_one("SELECT id FROM agents WHERE id = :id", id=payload.agent_id) is None:
        raise HTTPException(status_code=404, detail="Agent not found")
    if fetch_one("SELECT id FROM tickets WHERE id = :id", id=ticket_id) is None:
        raise HTTPException(status_code=404, detail="Ticket not found")
    execute("UPDATE tickets SET assignee_id = :a, updated_at = :now WHERE id = :id", a=payload.agent_id, now=NOW,
            id=ticket_id)
    return fetch_one("SELECT * FROM tickets WHERE id = :id", id=ticket_id)


@app.post("/api/tickets/{ticket_id}/comments", operation_id="add_ticket_comment", tags=["comments"],
          summary="Add a public reply or an internal note to a ticket")
def add_ticket_comment(ticket_id: int, payload: CommentCreate):
    if fetch_one("SELECT id FROM tickets WHERE id = :id", id=ticket_id) is None:
        raise HTTPException(status_code=404, detail="Ticket not found")
    comment_id = execute("INSERT INTO ticket_comments (ticket_id, author_id, body, is_internal, created_at) "
                         "VALUES (:t, :u, :b, :i, :now)", t=ticket_id, u=CURRENT_USER_ID, b=payload.body,
                         i=int(payload.is_internal), now=NOW)
    return fetch_one("SELECT * FROM ticket_comments WHERE id = :id", id=comment_id)


@app.get("/api/agents", operation_id="list_agents", tags=["agents"],
         summary="List support agents, optionally by team")
def list_agents(team: str | None = Query(None, description="Team name, e.g. network or hardware")):
    if team:
        return {"agents": fetch_all("SELECT * FROM agents WHERE team = :t ORDER BY id", t=team)}
    return {"agents": fetch_all("SELECT * FROM agents ORDER BY id")}


if __name__ == "__main__":
    import uvicorn

    uvicorn.run(app, host="127.0.0.1", port=8001)
