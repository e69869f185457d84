"""Scenario project_tracker_1: schema, sample rows, tasks with verifiers and gold calls."""

NAME = "project_tracker_1"
DESCRIPTION = ("A software team's issue tracker like Jira: projects (WEB, API, OPS) hold issues with a status "
               "(todo, in_progress, in_review, done), priority, story points, assignee, due date, labels and comments.")

TABLES = [
    ("projects", "CREATE TABLE projects (\n    id INTEGER PRIMARY KEY,\n    key TEXT UNIQUE NOT NULL,\n    name TEXT NOT NULL\n);", []),
    ("members", "CREATE TABLE members (\n    id INTEGER PRIMARY KEY,\n    name TEXT NOT NULL,\n    email TEXT UNIQUE NOT NULL\n);", []),
    ("issues", "CREATE TABLE issues (\n    id INTEGER PRIMARY KEY AUTOINCREMENT,\n    project_id INTEGER NOT NULL REFERENCES projects(id),\n"
               "    title TEXT NOT NULL,\n    description TEXT NOT NULL DEFAULT '',\n    status TEXT NOT NULL,\n"
               "    assignee_id INTEGER REFERENCES members(id),\n    priority TEXT NOT NULL,\n    story_points INTEGER,\n"
               "    due_date TEXT,\n    created_at DATETIME NOT NULL\n);", ["CREATE INDEX idx_issues_project ON issues(project_id, status);"]),
    ("labels", "CREATE TABLE labels (\n    id INTEGER PRIMARY KEY,\n    name TEXT UNIQUE NOT NULL\n);", []),
    ("issue_labels", "CREATE TABLE issue_labels (\n    issue_id INTEGER NOT NULL REFERENCES issues(id),\n"
                     "    label_id INTEGER NOT NULL REFERENCES labels(id),\n    PRIMARY KEY (issue_id, label_id)\n);", []),
    ("comments", "CREATE TABLE comments (\n    id INTEGER PRIMARY KEY AUTOINCREMENT,\n    issue_id INTEGER NOT NULL REFERENCES issues(id),\n"
                 "    author_id INTEGER NOT NULL,\n    body TEXT NOT NULL,\n    created_at DATETIME NOT NULL\n);", []),
]

SAMPLE = {
    "projects": (("id", "key", "name"), [(1, "WEB", "Web storefront"), (2, "API", "Public API"), (3, "OPS", "Operations")]),
    "members": (("id", "name", "email"), [(1, "Sasha Ivanova", "sasha@example.com"), (2, "Nina Park", "nina@example.com"),
                                           (3, "Diego Ramos", "diego@example.com"), (4, "Owen Clarke", "owen@example.com")]),
    "issues": (("id", "project_id", "title", "description", "status", "assignee_id", "priority", "story_points", "due_date", "created_at"), [
        (1, 1, "Login page 500 error", "Users see a 500 after entering a wrong password twice.", "in_progress", 3, "high", 3, None, "2024-06-03 10:00:00"),
        (2, 3, "Migrate CI to GitHub Actions", "Replace the old Jenkins pipelines.", "todo", None, "medium", 8, None, "2024-06-04 11:00:00"),
        (3, 1, "Write onboarding guide", "Guide for new frontend developers.", "todo", 4, "low", 2, None, "2024-06-05 09:30:00"),
        (4, 2, "Rate limit per API key", "Limit to 100 requests per minute.", "todo", 2, "high", 5, "2024-06-28", "2024-06-06 14:00:00"),
        (5, 2, "Paginate /orders endpoint", "Cursor-based pagination.", "in_review", 2, "medium", 3, None, "2024-06-07 15:00:00"),
        (6, 2, "Deprecate v1 auth", "", "todo", None, "low", 2, None, "2024-06-08 08:00:00"),
        (7, 2, "Fix timezone bug in invoices", "Invoices show UTC times.", "done", 3, "medium", 2, None, "2024-05-28 12:00:00"),
        (8, 1, "Dark mode toggle", "", "todo", None, "low", 3, None, "2024-06-10 16:00:00")]),
    "labels": (("id", "name"), [(1, "bug"), (2, "feature"), (3, "docs"), (4, "tech-debt")]),
    "issue_labels": (("issue_id", "label_id"), [(3, 3), (4, 2), (7, 1), (2, 4)]),
    "comments": (("id", "issue_id", "author_id", "body", "created_at"), [(1, 1, 3, "Reproduced on staging.", "2024-06-04 09:00:00")]),
}


def verify_create_issue(initial_db_path, final_db_path, final_answer=None):
    import sqlite3
    new = sqlite3.connect(final_db_path).execute(
        "SELECT project_id, title, status, priority, story_points FROM issues WHERE id > 8").fetchall()
    ok = new == [(1, "Checkout button unresponsive on Safari", "todo", "high", 3)]
    return {"result": "complete" if ok else "others"}


def verify_assign_and_start(initial_db_path, final_db_path, final_answer=None):
    import sqlite3
    rows = {r[0]: r[1:] for r in sqlite3.connect(final_db_path).execute("SELECT id, status, assignee_id FROM issues")}
    expected = {r[0]: r[1:] for r in sqlite3.connect(initial_db_path).execute("SELECT id, status, assignee_id FROM issues")}
    expected[2] = ("in_progress", 2)
    return {"result": "complete" if rows == expected else "others"}


def verify_due_date(initial_db_path, final_db_path, final_answer=None):
    import sqlite3
    due = dict(sqlite3.connect(final_db_path).execute("SELECT id, due_date FROM issues").fetchall())
    expected = dict(sqlite3.connect(initial_db_path).execute("SELECT id, due_date FROM issues").fetchall())
    expected[3] = "2024-07-01"
    return {"result": "complete" if due == expected else "others"}


def verify_label(initial_db_path, final_db_path, final_answer=None):
    import sqlite3
    labels = sorted(sqlite3.connect(final_db_path).execute("SELECT * FROM issue_labels").fetchall())
    expected = sorted(sqlite3.connect(initial_db_path).execute("SELECT * FROM issue_labels").fetchall() + [(1, 1)])
    return {"result": "complete" if labels == expected else "others"}


def verify_count_question(initial_db_path, final_db_path, final_answer=None):
    import re
    import sqlite3
    unchanged = list(sqlite3.connect(initial_db_path).iterdump()) == list(sqlite3.connect(final_db_path).iterdump())
    ok = unchanged and re.findall(r"\d+", final_answer or "")[-1:] == ["2"]
    return {"result": "complete" if ok else "others"}


TASKS = [
    {"task": "Create a high-priority issue 'Checkout button unresponsive on Safari' in the WEB project, estimated at 3 story points.",
     "verify": verify_create_issue,
     "gold": [("list_projects", {}),
              ("create_issue", {"project_id": 1, "title": "Checkout button unresponsive on Safari", "priority": "high", "story_points": 3})],
     "answer": "Created the issue in WEB (high priority, 3 points).",
     "wrong": [("create_issue", {"project_id": 2, "title": "Checkout button unresponsive on Safari", "priority": "high", "story_points": 3})]},
    {"task": "Assign 'Migrate CI to GitHub Actions' to Nina Park and move it to in progress.",
     "verify": verify_assign_and_start,
     "gold": [("search_issues", {"query": "Migrate CI"}), ("list_members", {}), ("assign_issue", {"issue_id": 2, "member_id": 2}),
              ("update_issue_status", {"issue_id": 2, "status": "in_progress"})],
     "answer": "Nina Park now owns the CI migration, which is in progress.",
     "wrong": [("assign_issue", {"issue_id": 2, "member_id": 2}), ("update_issue_status", {"issue_id": 2, "status": "in_review"})]},
    {"task": "Set the due date of 'Write onboarding guide' to 2024-07-01.",
     "verify": verify_due_date,
     "gold": [("search_issues", {"query": "onboarding guide"}), ("set_due_date", {"issue_id": 3, "due_date": "2024-07-01"})],
     "answer": "The onboarding guide is due on 2024-07-01.",
     "wrong": [("set_due_date", {"issue_id": 3, "due_date": "2024-06-30"})]},
    {"task": "Label the issue 'Login page 500 error' as a bug.",
     "verify": verify_label,
     "gold": [("search_issues", {"query": "Login page"}), ("add_label", {"issue_id": 1, "label": "bug"})],
     "answer": "Added the bug label to 'Login page 500 error'.",
     "wrong": [("add_label", {"issue_id": 1, "label": "feature"})]},
    {"task": "How many issues in the API project are still in todo? Reply with the number.",
     "verify": verify_count_question,
     "gold": [("list_projects", {}), ("list_issues", {"project_id": 2, "status": "todo"})],
     "answer": "There are 2 API issues in todo.",
     "wrong": [("update_issue_status", {"issue_id": 6, "status": "in_progress"})]},
]
