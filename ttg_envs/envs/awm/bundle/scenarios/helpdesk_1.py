"""Scenario helpdesk_1: schema, sample rows, tasks with verifiers and gold calls."""

NAME = "helpdesk_1"
DESCRIPTION = ("An IT helpdesk where employees open support tickets, follow their status and talk to support "
               "agents. Tickets have a subject, description, priority and status, can be assigned to agents in "
               "teams (network, hardware, accounts) and collect public replies and internal notes.")

TABLES = [
    ("users", "CREATE TABLE users (\n    id INTEGER PRIMARY KEY,\n    name TEXT NOT NULL,\n    email TEXT UNIQUE NOT NULL\n);", []),
    ("agents", "CREATE TABLE agents (\n    id INTEGER PRIMARY KEY,\n    name TEXT NOT NULL,\n    team TEXT NOT NULL\n);",
     ["CREATE INDEX idx_agents_team ON agents(team);"]),
    ("tickets", "CREATE TABLE tickets (\n    id INTEGER PRIMARY KEY AUTOINCREMENT,\n    subject TEXT NOT NULL,\n"
                "    description TEXT,\n    status TEXT NOT NULL DEFAULT 'open',\n    priority TEXT NOT NULL DEFAULT 'normal',\n"
                "    requester_id INTEGER NOT NULL REFERENCES users(id),\n    assignee_id INTEGER REFERENCES agents(id),\n"
                "    created_at DATETIME NOT NULL,\n    updated_at DATETIME NOT NULL\n);",
     ["CREATE INDEX idx_tickets_status ON tickets(status);"]),
    ("ticket_comments", "CREATE TABLE ticket_comments (\n    id INTEGER PRIMARY KEY AUTOINCREMENT,\n"
                        "    ticket_id INTEGER NOT NULL REFERENCES tickets(id),\n    author_id INTEGER NOT NULL,\n"
                        "    body TEXT NOT NULL,\n    is_internal INTEGER NOT NULL DEFAULT 0,\n    created_at DATETIME NOT NULL\n);", []),
]

SAMPLE = {
    "users": (("id", "name", "email"), [(1, "Jordan Lee", "jordan.lee@example.com"), (2, "Sam Ortiz", "sam.ortiz@example.com")]),
    "agents": (("id", "name", "team"), [(1, "Priya Shah", "hardware"), (2, "Marco Diaz", "network"),
                                        (3, "Hannah Berg", "accounts"), (4, "Tomas Novak", "network")]),
    "tickets": (("id", "subject", "description", "status", "priority", "requester_id", "assignee_id", "created_at", "updated_at"), [
        (1, "Laptop fan very loud", "The fan runs at full speed all day.", "open", "normal", 1, 1, "2024-06-01 10:00:00", "2024-06-01 10:00:00"),
        (2, "Password reset link expired", "The reset link says it expired after one minute.", "open", "high", 1, 3, "2024-06-03 08:30:00", "2024-06-03 08:30:00"),
        (3, "Printer on floor 2 jams", "Every second page jams in tray 1.", "open", "low", 2, None, "2024-06-04 14:00:00", "2024-06-04 14:00:00"),
        (4, "Wi-Fi drops in meeting room B", "Connection drops every few minutes.", "open", "urgent", 1, 2, "2024-06-10 09:15:00", "2024-06-10 09:15:00"),
        (5, "VPN certificate warning", "Client warns about an untrusted certificate.", "pending", "high", 2, 2, "2024-06-11 11:00:00", "2024-06-11 11:00:00"),
        (6, "Switch in server room beeping", "Core switch beeps twice a minute.", "open", "urgent", 2, 4, "2024-06-12 16:45:00", "2024-06-12 16:45:00"),
        (7, "Need second monitor", "Requesting a second 27 inch monitor.", "resolved", "low", 1, 1, "2024-05-20 12:00:00", "2024-05-22 12:00:00"),
        (8, "Guest network password", "Guest Wi-Fi password for visitors next week.", "open", "normal", 2, 2, "2024-06-13 10:20:00", "2024-06-13 10:20:00"),
    ]),
    "ticket_comments": (("id", "ticket_id", "author_id", "body", "is_internal", "created_at"), [
        (1, 1, 1, "It is worse when charging.", 0, "2024-06-01 11:00:00"),
        (2, 4, 1, "Happens in room B only.", 0, "2024-06-10 10:00:00"),
    ]),
}


def verify_create(initial_db_path, final_db_path, final_answer=None):
    import sqlite3
    before = sqlite3.connect(initial_db_path).execute("SELECT COUNT(*) FROM tickets").fetchone()[0]
    conn = sqlite3.connect(final_db_path)
    rows = conn.execute("SELECT subject, description, priority, status, requester_id FROM tickets WHERE id > 8").fetchall()
    ok = before == 8 and rows == [("VPN drops every 10 minutes", "My VPN connection drops every 10 minutes at home.",
                                   "high", "open", 1)]
    return {"result": "complete" if ok else "others"}


def verify_assign(initial_db_path, final_db_path, final_answer=None):
    import sqlite3
    conn = sqlite3.connect(final_db_path)
    assignees = dict(conn.execute("SELECT id, assignee_id FROM tickets").fetchall())
    expected = dict(sqlite3.connect(initial_db_path).execute("SELECT id, assignee_id FROM tickets").fetchall())
    expected[3] = 1
    return {"result": "complete" if assignees == expected else "others"}


def verify_resolve_with_reply(initial_db_path, final_db_path, final_answer=None):
    import sqlite3
    conn = sqlite3.connect(final_db_path)
    status = conn.execute("SELECT status FROM tickets WHERE id = 2").fetchone()[0]
    comments = conn.execute("SELECT body, is_internal FROM ticket_comments WHERE ticket_id = 2").fetchall()
    ok = status == "resolved" and comments == [("Sent a new reset link; please confirm it works.", 0)]
    return {"result": "complete" if ok else "others"}


def verify_internal_note(initial_db_path, final_db_path, final_answer=None):
    import sqlite3
    conn = sqlite3.connect(final_db_path)
    notes = conn.execute("SELECT ticket_id, body, is_internal FROM ticket_comments WHERE id > 2").fetchall()
    ok = notes == [(6, "Escalated to the network team.", 1)]
    return {"result": "complete" if ok else "others"}


def verify_count(initial_db_path, final_db_path, final_answer=None):
    import re
    import sqlite3
    unchanged = list(sqlite3.connect(initial_db_path).iterdump()) == list(sqlite3.connect(final_db_path).iterdump())
    numbers = re.findall(r"\d+", final_answer or "")
    ok = unchanged and numbers[-1:] == ["2"]
    return {"result": "complete" if ok else "others"}


TASKS = [
    {"task": "Open a high-priority ticket with the subject 'VPN drops every 10 minutes' and the description "
             "'My VPN connection drops every 10 minutes at home.'",
     "verify": verify_create,
     "gold": [("create_ticket", {"subject": "VPN drops every 10 minutes",
                                 "description": "My VPN connection drops every 10 minutes at home.", "priority": "high"})],
     "answer": "I opened the high-priority ticket 'VPN drops every 10 minutes'.",
     "wrong": [("create_ticket", {"subject": "VPN drops every 10 minutes",
                                  "description": "My VPN connection drops every 10 minutes at home.", "priority": "normal"})]},
    {"task": "Assign the ticket 'Printer on floor 2 jams' to the agent Priya Shah.",
     "verify": verify_assign,
     "gold": [("search_tickets", {"query": "Printer on floor 2"}), ("list_agents", {}),
              ("assign_ticket", {"ticket_id": 3, "agent_id": 1})],
     "answer": "The printer ticket is now assigned to Priya Shah.",
     "wrong": [("list_agents", {}), ("assign_ticket", {"ticket_id": 1, "agent_id": 1})]},
    {"task": "Mark my ticket about the expired password reset link as resolved and add a public reply saying "
             "'Sent a new reset link; please confirm it works.'",
     "verify": verify_resolve_with_reply,
     "gold": [("search_tickets", {"query": "reset link"}),
              ("add_ticket_comment", {"ticket_id": 2, "body": "Sent a new reset link; please confirm it works.",
                                      "is_internal": False}),
              ("update_ticket_status", {"ticket_id": 2, "status": "resolved"})],
     "answer": "Ticket 2 is resolved and the reply was posted.",
     "wrong": [("add_ticket_comment", {"ticket_id": 2, "body": "Sent a new reset link; please confirm it works.",
                                       "is_internal": True}),
               ("update_ticket_status", {"ticket_id": 2, "status": "resolved"})]},
    {"task": "Add the internal note 'Escalated to the network team.' to the most recently opened urgent ticket.",
     "verify": verify_internal_note,
     "gold": [("list_tickets", {"priority": "urgent"}),
              ("add_ticket_comment", {"ticket_id": 6, "body": "Escalated to the network team.", "is_internal": True})],
     "answer": "I added the internal note to ticket 6, 'Switch in server room beeping'.",
     "wrong": [("add_ticket_comment", {"ticket_id": 4, "body": "Escalated to the network team.", "is_internal": True})]},
    {"task": "How many open tickets are assigned to Marco Diaz? Reply with the number.",
     "verify": verify_count,
     "gold": [("list_agents", {"team": "network"}), ("list_tickets", {"status": "open", "assignee_id": 2})],
     "answer": "Marco Diaz has 2 open tickets.",
     "wrong": [("update_ticket_status", {"ticket_id": 8, "status": "closed"})]},
]
