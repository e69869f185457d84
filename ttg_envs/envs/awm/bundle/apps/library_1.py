"""Public library: catalogue, loans, renewals and holds (user 1 is the signed-in member)."""

from datetime import datetime, timedelta

from fastapi import FastAPI, HTTPException, Query
from sqlalchemy import create_engine, text

DATABASE_URL = "sqlite:///./outputs/databases/library_1.db"
engine = create_engine(DATABASE_URL, connect_args={"check_same_thread": False})
app = FastAPI(title="Library API")
CURRENT_MEMBER_ID = 1
TODAY = "2024-06-15"
LOAN_DAYS = 21
RENEW_DAYS = 14


def fetch_all(sql: str, **params):
    with engine.connect() as conn:
        return [dict(row._mapping) for row in conn.execute(text(sql), params)]


def fetch_one(sql: str, **params):
    rows = fetch_all(sql, **params)
    return rows[0] if rows else None


def execute(sql: str, **params) -> int:
    with engine.begin() as conn:
        return conn.execute(text(sql), params).lastrowid


def add_days(day: str, days: int) -> str:
    return (datetime.strptime(day, "%Y-%m-%d") + timedelta(days=days)).strftime("%Y-%m-%d")


def available(book_id: int) -> int:
    row = fetch_one("SELECT b.copies - (SELECT COUNT(*) FROM loans l WHERE l.book_id = b.id AND l.returned_at IS NULL) "
                    "AS n FROM books b WHERE b.id = :id", id=book_id)
    if row is None:
        raise HTTPException(status_code=404, detail="Book not found")
    return row["n"]


def my_loan(loan_id: int):
    loan = fetch_one("SELECT * FROM loans WHERE id = :id AND member_id = :m", id=loan_id, m=CURRENT_MEMBER_ID)
    if loan is None:
        raise HTTPException(status_code=404, detail="Loan not found")
    return loan


@app.get("/api/books/search", operation_id="search_books", tags=["catalogue"],
         summary="Search the catalogue by title or author; shows how many copies are available")
def search_books(query: str = Query(..., description="Part of a title or author name")):
    books = fetch_all("SELECT * FROM books WHERE title LIKE :p OR author LIKE :p ORDER BY title", p=f"%{query}%")
    for book in books:
        book["available_copies"] = available(book["id"])
    return {"books": books}


@app.get("/api/loans", operation_id="list_my_loans", tags=["loans"],
         summary="The current member's loans (open ones only unless include_returned)")
def list_my_loans(include_returned: bool = Query(False, description="Also list returned loans")):
    sql = ("SELECT l.*, b.title FROM loans l JOIN books b ON b.id = l.book_id WHERE l.member_id = :m"
           + ("" if include_returned else " AND l.returned_at IS NULL"))
    return {"loans": fetch_all(sql + " ORDER BY l.due_at", m=CURRENT_MEMBER_ID)}


@app.post("/api/books/{book_id}/checkout", operation_id="checkout_book", tags=["loans"],
          summary="Borrow an available copy of a book for 21 days")
def checkout_book(book_id: int):
    if available(book_id) <= 0:
        raise HTTPException(status_code=409, detail="No copy available; place a hold instead")
    if fetch_one("SELECT id FROM loans WHERE book_id = :b AND member_id = :m AND returned_at IS NULL", b=book_id,
                 m=CURRENT_MEMBER_ID):
        raise HTTPException(status_code=409, detail="You already have this book")
    loan_id = execute("INSERT INTO loans (book_id, member_id, loaned_at, due_at, returned_at) VALUES "
                      "(:b, :m, :today, :due, NULL)", b=book_id, m=CURRENT_MEMBER_ID, today=TODAY,
                      due=add_days(TODAY, LOAN_DAYS))
    return my_loan(loan_id)


@app.post("/api/loans/{loan_id}/return", operation_id="return_book", tags=["loans"], summary="Return a borrowed book")
def return_book(loan_id: int):
    if my_loan(loan_id)["returned_at"] is not None:
        raise HTTPException(status_code=409, detail="Already returned")
    execute("UPDATE loans SET returned_at = :today WHERE id = :id", today=TODAY, id=loan_id)
    return my_loan(loan_id)


@app.post("/api/loans/{loan_id}/renew", operation_id="renew_loan", tags=["loans"],
          summary="Extend an open loan by 14 days from its due date (not possible when others hold the book)")
def renew_loan(loan_id: int):
    loan = my_loan(loan_id)
    if loan["returned_at"] is not None:
        raise HTTPException(status_code=409, detail="Loan already returned")
    if fetch_one("SELECT id FROM holds WHERE book_id = :b AND status = 'active' AND member_id != :m",
                 b=loan["book_id"], m=CURRENT_MEMBER_ID):
        raise HTTPException(status_code=409, detail="Another member is waiting for this book")
    execute("UPDATE loans SET due_at = :due WHERE id = :id", due=add_days(loan["due_at"], RENEW_DAYS), id=loan_id)
    return my_loan(loan_id)


@app.post("/api/books/{book_id}/holds", operation_id="place_hold", tags=["holds"],
          summary="Reserve a book that has no available copy")
def place_hold(book_id: int):
    if available(book_id) > 0:
        raise HTTPException(status_code=409, detail="A copy is available; check it out instead")
    hold_id = execute("INSERT INTO holds (book_id, member_id, created_at, status) VALUES (:b, :m, :today, 'active')",
                      b=book_id, m=CURRENT_MEMBER_ID, today=TODAY)
    return fetch_one("SELECT * FROM holds WHERE id = :id", id=hold_id)


@app.get("/api/holds", operation_id="list_my_holds", tags=["holds"], summary="The current member's active holds")
def list_my_holds():
    return {"holds": fetch_all("SELECT h.*, b.title FROM holds h JOIN books b ON b.id = h.book_id WHERE "
                               "h.member_id = :m AND h.status = 'active' ORDER BY h.id", m=CURRENT_MEMBER_ID)}


@app.delete("/api/holds/{hold_id}", operation_id="cancel_hold", tags=["holds"], summary="Cancel one of your holds")
def cancel_hold(hold_id: int):
    if fetch_one("SELECT id FROM holds WHERE id = :id AND member_id = :m AND status = 'active'", id=hold_id,
                 m=CURRENT_MEMBER_ID) is None:
        raise HTTPException(status_code=404, detail="Hold not found")
    execute("UPDATE holds SET status = 'cancelled' WHERE id = :id", id=hold_id)
    return {"cancelled": hold_id}


if __name__ == "__main__":
    import uvicorn

    uvicorn.run(app, host="127.0.0.1", port=8001)
