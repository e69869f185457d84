"""Project tracker: projects, issues with status, assignee, due date and labels, and comments."""

from datetime import date

from fastapi import FastAPI, HTTPException, Query
from pydantic import BaseModel
from sqlalchemy import create_engine, text

DATABASE_URL = "sqlite:///./outputs/databases/project_tracker_1.db"
engine = create_engine(DATABASE_URL, connect_args={"check_same_thread": False})
app = FastAPI(title="Project Tracker API")
CURRENT_USER_ID = 1
NOW = "2024-06-15 09:00:00"
STATUSES = ("todo", "in_progress", "in_review", "done")


def fetch_all(sql: str, **params):
    with engine.connect() as conn:
        return [dict(row._mapping) for row in conn.execute(text(sql), params)]


def fetch_one(sql: str, **params):
    rows = fetch_all(sql, **params)
    return rows[0] if rows else None


def execute(sql: str, **params) -> int:
    with engine.begin() as conn:
        return conn.execute(text(sql), params).lastrowid


def issue_or_404(issue_id: int):
    issue = fetch_one("SELECT * FROM issues WHERE id = :id", id=issue_id)
    if issue is None:
        raise HTTPException(status_code=404, detail="Issue not found")
    issue["labels"] = [r["name"] for r in fetch_all("SELECT l.name FROM issue_labels il JOIN labels l ON "
                                                     "l.id = il.label_id WHERE il.issue_id = :id ORDER BY l.name",
                                                     id=issue_id)]
    return issue


class IssueCreate(BaseModel):
    project_id: int
    title: str
    description: str = ""
    priority: str = "medium"
    story_points: int | None = None


class StatusUpdate(BaseModel):
    status: str


class Assignment(BaseModel):
    member_id: int


class DueDate(BaseModel):
    due_date: date


class LabelAdd(BaseModel):
    label: str


class CommentCreate(BaseModel):
    body: str


@app.get("/api/projects", operation_id="list_projects", tags=["projects"], summary="List projects with their keys")
def list_projects():
    return {"projects": fetch_all("SELECT * FROM projects ORDER BY id")}


@app.get("/api/members", operation_id="list_members", tags=["projects"], summary="List team members")
def list_members():
    return {"members": fetch_all("SELECT * FROM members ORDER BY id")}


@app.get("/api/projects/{project_id}/issues", operation_id="list_issues", tags=["issues"],
         summary="Issues of a project, optionally by status or assignee")
def list_issues(project_id: int, status: str | None = Query(None, description="todo, in_progress, in_review or done"),
                assignee_id: int | None = Query(None, description="Member id")):
    sql = "SELECT * FROM issues WHERE project_id = :p"
    if status:
        sql += " AND status = :s"
    if assignee_id is not None:
        sql += " AND assignee_id = :a"
    return {"issues": fetch_all(sql + " ORDER BY id", p=project_id, s=status, a=assignee_id)}


@app.get("/api/issues/search", operation_id="search_issues", tags=["issues"], summary="Find issues by title words")
def search_issues(query: str = Query(..., description="Part of the title")):
    return {"issues": fetch_all("SELECT * FROM issues WHERE title LIKE :p ORDER BY id", p=f"%{query}%")}


@app.get("/api/issues/{issue_id}", operation_id="get_issue", tags=["issues"], summary="An issue with its labels")
def get_issue(issue_id: int):
    issue = issue_or_404(issue_id)
    issue["comments"] = fetch_all("SELECT * FROM comments WHERE issue_id = :id ORDER BY id", id=issue_id)
    return issue


@app.post("/api/issues", operation_id="create_issue", tags=["issues"], summary="Create an issue in a project")
def create_issue(payload: IssueCreate):
    if fetch_one("SELECT id FROM projects WHERE id = :id", id=payload.project_id) is None:
        raise HTTPException(status_code=404, detail="Project not found")
    if payload.priority not in ("low", "medium", "high", "critical"):
        raise HTTPException(status_code=422, detail="priority must be low, medium, high or critical")
    issue_id = execute("INSERT INTO issues (project_id, title, description, status, assignee_id, priority, "
                       "story_points, due_date, created_at) VALUES (:p, :t, :d, 'todo', NULL, :pr, :sp, NULL, :now)",
                       p=payload.project_id, t=payload.title, d=payload.description, pr=payload.priority,
                       sp=payload.story_points, now=NOW)
    return issue_or_404(issue_id)


@app.put("/api/issues/{issue_id}/status", operation_id="update_issue_status", tags=["issues"],
         summary="Move an issue to todo, in_progress, in_review or done")
def update_issue_status(issue_id: int, payload: StatusUpdate):
    issue_or_404(issue_id)
    if payload.status not in STATUSES:
        raise HTTPException(status_code=422, detail="status must be one of " + ", ".join(STATUSES))
    execute("UPDATE issues SET status = :s WHERE id = :id", s=payload.status, id=issue_id)
    return issue_or_404(issue_id)


@app.put("/api/issues/{issue_id}/assignee", operation_id="assign_issue", tags=["issues"],
         summary="Assign an issue to a team member")
def assign_issue(issue_id: int, payload: Assignment):
    issue_or_404(issue_id)
    if fetch_one("SELECT id FROM members WHERE id = :id", id=payload.member_id) is None:
        raise HTTPException(status_code=404, detail="Member not found")
    execute("UPDATE issues SET assignee_id = :m WHERE id = :id", m=payload.member_id, id=issue_id)
    return issue_or_404(issue_id)


@app.put("/api/issues/{issue_id}/due-date", operation_id="set_due_date", tags=["issues"],
         summary="Set an issue's due date (YYYY-MM-DD)")
def set_due_date(issue_id: int, payload: DueDate):
    issue_or_404(issue_id)
    execute("UPDATE issues SET due_date = :d WHERE id = :id", d=payload.due_date.isoformat(), id=issue_id)
    return issue_or_404(issue_id)


@app.post("/api/issues/{issue_id}/labels", operation_id="add_label", tags=["labels"],
          summary="Put an existing label (bug, feature, docs, tech-debt) on an issue")
def add_label(issue_id: int, payload: LabelAdd):
    issue_or_404(issue_id)
    label = fetch_one("SELECT id FROM labels WHERE name = :n", n=payload.label)
    if label is None:
        raise HTTPException(status_code=404, detail="Label not found")
    if fetch_one("SELECT 1 AS x FROM issue_labels WHERE issue_id = :i AND label_id = :l", i=issue_id, l=label["id"]) is None:
        execute("INSERT INTO issue_labels (issue_id, label_id) VALUES (:i, :l)", i=issue_id, l=label["id"])
    return issue_or_404(issue_id)


@app.post("/api/issues/{issue_id}/comments", operation_id="add_comment", tags=["issues"], summary="Comment on an issue")
def add_comment(issue_id: int, payload: CommentCreate):
    issue_or_404(issue_id)
    comment_id = execute("INSERT INTO comments (issue_id, author_id, body, created_at) VALUES (:i, :u, :b, :now)",
                         i=issue_id, u=CURRENT_USER_ID, b=payload.body, now=NOW)
    return fetch_one("SELECT * FROM comments WHERE id = :id", id=comment_id)


if __name__ == "__main__":
    import uvicorn

    uvicorn.run(app, host="127.0.0.1", port=8001)
