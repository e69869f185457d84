"""Calendar: events, attendees and invitation responses (user 1 is signed in)."""

from datetime import datetime

from fastapi import FastAPI, HTTPException, Query
from pydantic import BaseModel
from sqlalchemy import create_engine, text

DATABASE_URL = "sqlite:///./outputs/databases/calendar_1.db"
engine = create_engine(DATABASE_URL, connect_args={"check_same_thread": False})
app = FastAPI(title="Calendar API")
CURRENT_USER_ID = 1


def fetch_all(sql: str, **params):
    with engine.connect() as conn:
        return [dict(row._mapping) for row in conn.execute(text(sql), params)]


def fetch_one(sql: str, **params):
    rows = fetch_all(sql, **params)
    return rows[0] if rows else None


def execute(sql: str, **params) -> int:
    with engine.begin() as conn:
        return conn.execute(text(sql), params).lastrowid


def stamp(value: datetime) -> str:
    return value.strftime("%Y-%m-%d %H:%M")


def own_event(event_id: int):
    event = fetch_one("SELECT * FROM events WHERE id = :id", id=event_id)
    if event is None:
        raise HTTPException(status_code=404, detail="Event not found")
    if event["owner_id"] != CURRENT_USER_ID:
        raise HTTPException(status_code=403, detail="Only the organiser can change this event")
    return event


class EventCreate(BaseModel):
    title: str
    start_time: datetime
    end_time: datetime
    location: str = ""
    description: str = ""


class EventTimeUpdate(BaseModel):
    start_time: datetime
    end_time: datetime


class AttendeeAdd(BaseModel):
    user_id: int


class InvitationResponse(BaseModel):
    response: str


@app.get("/api/events", operation_id="list_events", tags=["events"],
         summary="Events the current user organises or attends, optionally between two dates (YYYY-MM-DD)")
def list_events(date_from: str | None = Query(None, description="First day, YYYY-MM-DD"),
                date_to: str | None = Query(None, description="Last day, YYYY-MM-DD")):
    sql = ("SELECT DISTINCT e.* FROM events e LEFT JOIN event_attendees a ON a.event_id = e.id "
           "WHERE (e.owner_id = :u OR a.user_id = :u)")
    if date_from:
        sql += " AND e.start_time >= :f"
    if date_to:
        sql += " AND e.start_time < date(:t, '+1 day')"
    return {"events": fetch_all(sql + " ORDER BY e.start_time", u=CURRENT_USER_ID, f=date_from, t=date_to)}


@app.get("/api/events/search", operation_id="search_events", tags=["events"],
         summary="Find events by words in the title")
def search_events(query: str = Query(..., description="Part of the title")):
    return {"events": fetch_all("SELECT * FROM events WHERE title LIKE :p ORDER BY start_time", p=f"%{query}%")}


@app.get("/api/events/{event_id}", operation_id="get_event", tags=["events"],
         summary="An event with its attendees and their responses")
def get_event(event_id: int):
    event = fetch_one("SELECT * FROM events WHERE id = :id", id=event_id)
    if event is None:
        raise HTTPException(status_code=404, detail="Event not found")
    event["attendees"] = fetch_all("SELECT u.id, u.name, a.response FROM event_attendees a JOIN users u "
                                   "ON u.id = a.user_id WHERE a.event_id = :id ORDER BY u.id", id=event_id)
    return event


@app.post("/api/events", operation_id="create_event", tags=["events"],
          summary="Create an event organised by the current user")
def create_event(payload: EventCreate):
    if payload.end_time <= payload.start_time:
        raise HTTPException(status_code=422, detail="end_time must be after start_time")
    event_id = execute("INSERT INTO events (owner_id, title, start_time, end_time, location, description) "
                       "VALUES (:u, :t, :s, :e, :l, :d)", u=CURRENT_USER_ID, t=payload.title,
                       s=stamp(payload.start_time), e=stamp(payload.end_time), l=payload.location,
                       d=payload.description)
    return get_event(event_id)


@app.put("/api/events/{event_id}/time", operation_id="update_event_time", tags=["events"],
         summary="Move an event the current user organises")
def update_event_time(event_id: int, payload: EventTimeUpdate):
    own_event(event_id)
    if payload.end_time <= payload.start_time:
        raise HTTPException(status_code=422, detail="end_time must be after start_time")
    execute("UPDATE events SET start_time = :s, end_time = :e WHERE id = :id", s=stamp(payload.start_time),
            e=stamp(payload.end_time), id=event_id)
    return get_event(event_id)


@app.delete("/api/events/{event_id}", operation_id="delete_event", tags=["events"],
            summary="Cancel (delete) an event the current user organises")
def delete_event(event_id: int):
    own_event(event_id)
    with engine.begin() as conn:
        conn.execute(text("DELETE FROM event_attendees WHERE event_id = :id"), {"id": event_id})
        conn.execute(text("DELETE FROM events WHERE id = :id"), {"id": event_id})
    return {"deleted": event_id}


@app.post("/api/events/{event_id}/attendees", operation_id="add_attendee", tags=["attendees"],
          summary="Invite a user to an event the current user organises")
def add_attendee(event_id: int, payload: AttendeeAdd):
    own_event(event_id)
    if fetch_one("SELECT id FROM users WHERE id = :id", id=payload.user_id) is None:
        raise HTTPException(status_code=404, detail="User not found")
    if fetch_one("SELECT 1 AS x FROM event_attendees WHERE event_id = :e AND user_id = :u", e=event_id,
                 u=payload.user_id) is None:
        execute("INSERT INTO event_attendees (event_id, user_id, response) VALUES (:e, :u, 'needs_action')",
                e=event_id, u=payload.user_id)
    return get_event(event_id)


@app.put("/api/events/{event_id}/response", operation_id="respond_to_invitation", tags=["attendees"],
         summary="Answer an invitation: accepted, declined or tentative")
def respond_to_invitation(event_id: int, payload: InvitationResponse):
    if payload.response not in ("accepted", "declined", "tentative"):
        raise HTTPException(status_code=422, detail="response must be accepted, declined or tentative")
    if fetch_one("SELECT 1 AS x FROM event_attendees WHERE event_id = :e AND user_id = :u", e=event_id,
                 u=CURRENT_USER_ID) is None:
        raise HTTPException(status_code=404, detail="You are not invited to this event")
    execute("UPDATE event_attendees SET response = :r WHERE event_id = :e AND user_id = :u", r=payload.response,
            e=event_id, u=CURRENT_USER_ID)
    return get_event(event_id)


@app.get("/api/contacts/search", operation_id="search_contacts", tags=["contacts"],
         summary="Find people by name or email")
def search_contacts(query: str = Query(..., description="Part of a name or email")):
    pattern = f"%{query}%"
    return {"contacts": fetch_all("SELECT * FROM users WHERE name LIKE :p OR email LIKE :p ORDER BY id", p=pattern)}


if __name__ == "__main__":
    import uvicorn

    uvicorn.run(app, host="127.0.0.1", port=8001)
