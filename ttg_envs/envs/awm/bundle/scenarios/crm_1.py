"""Scenario crm_1: schema, sample rows, tasks with verifiers and gold calls."""

NAME = "crm_1"
DESCRIPTION = ("A sales CRM: companies and their contacts, deals that move through the pipeline stages "
               "prospecting, qualification, proposal, negotiation, closed_won and closed_lost, and calls, emails "
               "and meetings logged on deals.")

TABLES = [
    ("users", "CREATE TABLE users (\n    id INTEGER PRIMARY KEY,\n    name TEXT NOT NULL\n);", []),
    ("companies", "CREATE TABLE companies (\n    id INTEGER PRIMARY KEY,\n    name TEXT NOT NULL,\n    industry TEXT NOT NULL,\n    city TEXT NOT NULL\n);", []),
    ("contacts", "CREATE TABLE contacts (\n    id INTEGER PRIMARY KEY AUTOINCREMENT,\n    company_id INTEGER NOT NULL REFERENCES companies(id),\n"
                 "    name TEXT NOT NULL,\n    email TEXT NOT NULL,\n    title TEXT NOT NULL DEFAULT ''\n);", []),
    ("deals", "CREATE TABLE deals (\n    id INTEGER PRIMARY KEY AUTOINCREMENT,\n    company_id INTEGER NOT NULL REFERENCES companies(id),\n"
              "    name TEXT NOT NULL,\n    stage TEXT NOT NULL,\n    amount REAL NOT NULL,\n    owner_id INTEGER NOT NULL REFERENCES users(id),\n"
              "    close_date TEXT NOT NULL\n);", ["CREATE INDEX idx_deals_stage ON deals(stage);"]),
    ("activities", "CREATE TABLE activities (\n    id INTEGER PRIMARY KEY AUTOINCREMENT,\n    deal_id INTEGER NOT NULL REFERENCES deals(id),\n"
                   "    kind TEXT NOT NULL,\n    note TEXT NOT NULL,\n    due_date TEXT,\n    author_id INTEGER NOT NULL\n);", []),
]

SAMPLE = {
    "users": (("id", "name"), [(1, "Dana Whitfield"), (2, "Felix Braun")]),
    "companies": (("id", "name", "industry", "city"), [
        (1, "Acme Corp", "manufacturing", "Chicago"), (2, "Globex", "energy", "Houston"),
        (3, "Initech", "software", "Austin"), (4, "Umbrella Health", "healthcare", "Boston")]),
    "contacts": (("id", "company_id", "name", "email", "title"), [
        (1, 1, "Wile Carter", "wile@acme.example", "CTO"), (2, 2, "Hank Scorpio", "hank@globex.com", "CEO"),
        (3, 3, "Bill Lumbergh", "bill@initech.example", "VP Operations")]),
    "deals": (("id", "company_id", "name", "stage", "amount", "owner_id", "close_date"), [
        (1, 1, "Acme Corp renewal 2024", "negotiation", 42000.0, 1, "2024-06-30"),
        (2, 3, "Initech expansion", "proposal", 65000.0, 1, "2024-08-15"),
        (3, 2, "Globex analytics pilot", "qualification", 12000.0, 2, "2024-07-31"),
        (4, 1, "Acme Corp add-on seats", "closed_won", 80000.0, 1, "2024-03-01"),
        (5, 2, "Globex data platform", "closed_lost", 150000.0, 2, "2024-02-15")]),
    "activities": (("id", "deal_id", "kind", "note", "due_date", "author_id"), [
        (1, 1, "meeting", "Kick-off with procurement.", None, 1), (2, 2, "email", "Sent case studies.", None, 1)]),
}


def verify_won(initial_db_path, final_db_path, final_answer=None):
    import sqlite3
    stages = dict(sqlite3.connect(final_db_path).execute("SELECT id, stage FROM deals").fetchall())
    expected = dict(sqlite3.connect(initial_db_path).execute("SELECT id, stage FROM deals").fetchall())
    expected[1] = "closed_won"
    return {"result": "complete" if stages == expected else "others"}


def verify_contact(initial_db_path, final_db_path, final_answer=None):
    import sqlite3
    new = sqlite3.connect(final_db_path).execute("SELECT company_id, name, email, title FROM contacts WHERE id > 3").fetchall()
    ok = new == [(2, "Mei Chen", "mei.chen@globex.com", "Head of Procurement")]
    return {"result": "complete" if ok else "others"}


def verify_call(initial_db_path, final_db_path, final_answer=None):
    import sqlite3
    new = sqlite3.connect(final_db_path).execute("SELECT deal_id, kind, note FROM activities WHERE id > 2").fetchall()
    ok = new == [(2, "call", "Discussed pricing tiers; send proposal by Friday.")]
    return {"result": "complete" if ok else "others"}


def verify_new_deal(initial_db_path, final_db_path, final_answer=None):
    import sqlite3
    new = sqlite3.connect(final_db_path).execute(
        "SELECT company_id, name, stage, amount, owner_id, close_date FROM deals WHERE id > 5").fetchall()
    ok = new == [(4, "Umbrella pilot", "qualification", 18000.0, 1, "2024-09-30")]
    return {"result": "complete" if ok else "others"}


def verify_largest_question(initial_db_path, final_db_path, final_answer=None):
    import re
    import sqlite3
    unchanged = list(sqlite3.connect(initial_db_path).iterdump()) == list(sqlite3.connect(final_db_path).iterdump())
    numbers = [n.replace(",", "") for n in re.findall(r"\d[\d,]*(?:\.\d+)?", final_answer or "")]
    ok = unchanged and any(float(n) == 65000.0 for n in numbers) and "initech" in (final_answer or "").lower()
    return {"result": "complete" if ok else "others"}


TASKS = [
    {"task": "We won the 'Acme Corp renewal 2024' deal. Mark it as closed won.",
     "verify": verify_won,
     "gold": [("list_deals", {"stage": "negotiation"}), ("update_deal_stage", {"deal_id": 1, "stage": "closed_won"})],
     "answer": "Acme Corp renewal 2024 is now closed_won.",
     "wrong": [("update_deal_stage", {"deal_id": 4, "stage": "closed_won"}), ("update_deal_stage", {"deal_id": 1, "stage": "closed_lost"})]},
    {"task": "Add Mei Chen (mei.chen@globex.com), Head of Procurement, as a contact at Globex.",
     "verify": verify_contact,
     "gold": [("search_companies", {"query": "Globex"}),
              ("create_contact", {"company_id": 2, "name": "Mei Chen", "email": "mei.chen@globex.com", "title": "Head of Procurement"})],
     "answer": "Mei Chen is now a contact at Globex.",
     "wrong": [("create_contact", {"company_id": 2, "name": "Mei Chen", "email": "mei.chen@globex.com"})]},
    {"task": "Log a call on the 'Initech expansion' deal with the note 'Discussed pricing tiers; send proposal by Friday.'",
     "verify": verify_call,
     "gold": [("list_deals", {}), ("log_activity", {"deal_id": 2, "kind": "call", "note": "Discussed pricing tiers; send proposal by Friday."})],
     "answer": "Logged the call on Initech expansion.",
     "wrong": [("log_activity", {"deal_id": 2, "kind": "meeting", "note": "Discussed pricing tiers; send proposal by Friday."})]},
    {"task": "Create a deal 'Umbrella pilot' for Umbrella Health worth 18000 in the qualification stage, closing on 2024-09-30.",
     "verify": verify_new_deal,
     "gold": [("search_companies", {"query": "Umbrella"}),
              ("create_deal", {"company_id": 4, "name": "Umbrella pilot", "amount": 18000, "close_date": "2024-09-30",
                               "stage": "qualification"})],
     "answer": "Created the Umbrella pilot deal (18,000, qualification, closing 2024-09-30).",
     "wrong": [("create_deal", {"company_id": 4, "name": "Umbrella pilot", "amount": 18000, "close_date": "2024-09-30"})]},
    {"task": "Which open deal (not closed won or lost) has the largest amount, and how much is it?",
     "verify": verify_largest_question,
     "gold": [("list_deals", {})],
     "answer": "The largest open deal is Initech expansion at 65,000.",
     "wrong": [("update_deal_stage", {"deal_id": 2, "stage": "negotiation"})]},
]
