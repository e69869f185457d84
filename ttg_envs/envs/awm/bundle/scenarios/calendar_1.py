"""Scenario calendar_1: schema, sample rows, tasks with verifiers and gold calls."""

NAME = "calendar_1"
DESCRIPTION = ("A shared work calendar: events with a time, place and organiser, invitations to colleagues and "
               "their responses (accepted, declined, tentative). Times are local, written YYYY-MM-DD HH:MM.")

TABLES = [
    ("users", "CREATE TABLE users (\n    id INTEGER PRIMARY KEY,\n    name TEXT NOT NULL,\n    email TEXT UNIQUE NOT NULL\n);", []),
    ("events", "CREATE TABLE events (\n    id INTEGER PRIMARY KEY AUTOINCREMENT,\n    owner_id INTEGER NOT NULL REFERENCES users(id),\n"
               "    title TEXT NOT NULL,\n    start_time TEXT NOT NULL,\n    end_time TEXT NOT NULL,\n    location TEXT NOT NULL DEFAULT '',\n"
               "    description TEXT NOT NULL DEFAULT ''\n);", ["CREATE INDEX idx_events_start ON events(start_time);"]),
    ("event_attendees", "CREATE TABLE event_attendees (\n    event_id INTEGER NOT NULL REFERENCES events(id),\n"
                        "    user_id INTEGER NOT NULL REFERENCES users(id),\n    response TEXT NOT NULL DEFAULT 'needs_action',\n"
                        "    PRIMARY KEY (event_id, user_id)\n);", []),
]

SAMPLE = {
    "users": (("id", "name", "email"), [(1, "Chris Morgan", "chris@example.com"), (2, "Lena Vogt", "lena@example.com"),
                                         (3, "Omar Haddad", "omar@example.com"), (4, "Julia Rossi", "julia@example.com")]),
    "events": (("id", "owner_id", "title", "start_time", "end_time", "location", "description"), [
        (1, 1, "Quarterly planning", "2024-06-18 10:00", "2024-06-18 11:30", "Room 2.01", "Plan Q3 goals"),
        (2, 1, "Dentist appointment", "2024-06-19 08:00", "2024-06-19 09:00", "Dr. Weber, Hauptstr. 5", ""),
        (3, 1, "Design review", "2024-06-20 15:00", "2024-06-20 16:00", "Room 3.14", "Review onboarding screens"),
        (4, 3, "Friday social", "2024-06-21 17:00", "2024-06-21 19:00", "Rooftop terrace", "Drinks and snacks"),
        (5, 4, "Board meeting", "2024-06-24 09:00", "2024-06-24 12:00", "Boardroom, 7th floor", "Quarterly report"),
        (6, 1, "1:1 with Omar", "2024-06-17 13:00", "2024-06-17 13:30", "Room 2.05", "")]),
    "event_attendees": (("event_id", "user_id", "response"), [
        (1, 3, "accepted"), (1, 4, "tentative"), (3, 3, "accepted"), (4, 1, "needs_action"), (4, 2, "accepted"),
        (5, 1, "accepted"), (6, 3, "accepted")]),
}


def verify_create_event(initial_db_path, final_db_path, final_answer=None):
    import sqlite3
    new = sqlite3.connect(final_db_path).execute(
        "SELECT owner_id, title, start_time, end_time, location FROM events WHERE id > 6").fetchall()
    ok = new == [(1, "Budget review", "2024-06-20 14:00", "2024-06-20 15:00", "Room 4.12")]
    return {"result": "complete" if ok else "others"}


def verify_move(initial_db_path, final_db_path, final_answer=None):
    import sqlite3
    events = {r[0]: r[1:] for r in sqlite3.connect(final_db_path).execute("SELECT id, start_time, end_time FROM events")}
    expected = {r[0]: r[1:] for r in sqlite3.connect(initial_db_path).execute("SELECT id, start_time, end_time FROM events")}
    expected[1] = ("2024-06-21 10:00", "2024-06-21 11:30")
    return {"result": "complete" if events == expected else "others"}


def verify_cancel(initial_db_path, final_db_path, final_answer=None):
    import sqlite3
    conn = sqlite3.connect(final_db_path)
    ids = sorted(r[0] for r in conn.execute("SELECT id FROM events"))
    orphans = conn.execute("SELECT COUNT(*) FROM event_attendees WHERE event_id = 2").fetchone()[0]
    return {"result": "complete" if ids == [1, 3, 4, 5, 6] and orphans == 0 else "others"}


def verify_invite(initial_db_path, final_db_path, final_answer=None):
    import sqlite3
    rows = sorted(sqlite3.connect(final_db_path).execute("SELECT * FROM event_attendees").fetchall())
    expected = sorted(sqlite3.connect(initial_db_path).execute("SELECT * FROM event_attendees").fetchall() + [(3, 2, "needs_action")])
    return {"result": "complete" if rows == expected else "others"}


def verify_decline(initial_db_path, final_db_path, final_answer=None):
    import sqlite3
    rows = {(e, u): r for e, u, r in sqlite3.connect(final_db_path).execute("SELECT * FROM event_attendees")}
    expected = {(e, u): r for e, u, r in sqlite3.connect(initial_db_path).execute("SELECT * FROM event_attendees")}
    expected[(4, 1)] = "declined"
    return {"result": "complete" if rows == expected else "others"}


def verify_location_question(initial_db_path, final_db_path, final_answer=None):
    import sqlite3
    unchanged = list(sqlite3.connect(initial_db_path).iterdump()) == list(sqlite3.connect(final_db_path).iterdump())
    ok = unchanged and "boardroom" in (final_answer or "").lower() and "7th floor" in (final_answer or "").lower()
    return {"result": "complete" if ok else "others"}


TASKS = [
    {"task": "Schedule a 'Budget review' on 2024-06-20 from 14:00 to 15:00 in Room 4.12.",
     "verify": verify_create_event,
     "gold": [("create_event", {"title": "Budget review", "start_time": "2024-06-20T14:00:00",
                                "end_time": "2024-06-20T15:00:00", "location": "Room 4.12"})],
     "answer": "Budget review is scheduled for 20 June, 14:00-15:00 in Room 4.12.",
     "wrong": [("create_event", {"title": "Budget review", "start_time": "2024-06-20T15:00:00",
                                 "end_time": "2024-06-20T16:00:00", "location": "Room 4.12"})]},
    {"task": "Move my 'Quarterly planning' meeting to 2024-06-21, same times (10:00 to 11:30).",
     "verify": verify_move,
     "gold": [("search_events", {"query": "Quarterly planning"}),
              ("update_event_time", {"event_id": 1, "start_time": "2024-06-21T10:00:00", "end_time": "2024-06-21T11:30:00"})],
     "answer": "Quarterly planning now takes place on 21 June from 10:00 to 11:30.",
     "wrong": [("update_event_time", {"event_id": 1, "start_time": "2024-06-21T10:00:00", "end_time": "2024-06-21T11:00:00"})]},
    {"task": "Cancel my dentist appointment.",
     "verify": verify_cancel,
     "gold": [("search_events", {"query": "Dentist"}), ("delete_event", {"event_id": 2})],
     "answer": "The dentist appointment on 19 June is cancelled.",
     "wrong": [("delete_event", {"event_id": 6})]},
    {"task": "Invite Lena Vogt to the 'Design review'.",
     "verify": verify_invite,
     "gold": [("search_contacts", {"query": "Lena"}), ("search_events", {"query": "Design review"}),
              ("add_attendee", {"event_id": 3, "user_id": 2})],
     "answer": "Lena Vogt is invited to the Design review.",
     "wrong": [("add_attendee", {"event_id": 1, "user_id": 2})]},
    {"task": "Decline the invitation to the 'Friday social'.",
     "verify": verify_decline,
     "gold": [("search_events", {"query": "Friday social"}), ("respond_to_invitation", {"event_id": 4, "response": "declined"})],
     "answer": "Declined the Friday social.",
     "wrong": [("respond_to_invitation", {"event_id": 4, "response": "tentative"})]},
    {"task": "Where is the 'Board meeting' held?",
     "verify": verify_location_question,
     "gold": [("search_events", {"query": "Board meeting"})],
     "answer": "The Board meeting is in the Boardroom on the 7th floor.",
     "wrong": [("respond_to_invitation", {"event_id": 5, "response": "declined"})]},
]
