"""Scenario library_1: schema, sample rows, tasks with verifiers and gold calls."""

NAME = "library_1"
DESCRIPTION = ("A public library's member portal: search the catalogue, borrow books for 21 days, return and "
               "renew loans (14 more days unless someone is waiting), and place or cancel holds on books that "
               "are all out. Today is 2024-06-15.")

TABLES = [
    ("books", "CREATE TABLE books (\n    id INTEGER PRIMARY KEY,\n    title TEXT NOT NULL,\n    author TEXT NOT NULL,\n"
              "    isbn TEXT UNIQUE NOT NULL,\n    copies INTEGER NOT NULL\n);", ["CREATE INDEX idx_books_title ON books(title);"]),
    ("members", "CREATE TABLE members (\n    id INTEGER PRIMARY KEY,\n    name TEXT NOT NULL,\n    email TEXT UNIQUE NOT NULL\n);", []),
    ("loans", "CREATE TABLE loans (\n    id INTEGER PRIMARY KEY AUTOINCREMENT,\n    book_id INTEGER NOT NULL REFERENCES books(id),\n"
              "    member_id INTEGER NOT NULL REFERENCES members(id),\n    loaned_at TEXT NOT NULL,\n    due_at TEXT NOT NULL,\n"
              "    returned_at TEXT\n);", []),
    ("holds", "CREATE TABLE holds (\n    id INTEGER PRIMARY KEY AUTOINCREMENT,\n    book_id INTEGER NOT NULL REFERENCES books(id),\n"
              "    member_id INTEGER NOT NULL REFERENCES members(id),\n    created_at TEXT NOT NULL,\n    status TEXT NOT NULL\n);", []),
]

SAMPLE = {
    "books": (("id", "title", "author", "isbn", "copies"), [
        (1, "The Left Hand of Darkness", "Ursula K. Le Guin", "9780441478125", 2),
        (2, "Dune", "Frank Herbert", "9780441172719", 3),
        (3, "Middlemarch", "George Eliot", "9780141439549", 1),
        (4, "Piranesi", "Susanna Clarke", "9781635575637", 1),
        (5, "Circe", "Madeline Miller", "9780316556347", 1),
        (6, "The Dispossessed", "Ursula K. Le Guin", "9780061054884", 1)]),
    "members": (("id", "name", "email"), [(1, "Robin Meyer", "robin@example.com"), (2, "Kai Larsen", "kai@example.com"),
                                           (3, "Noor Ahmed", "noor@example.com")]),
    "loans": (("id", "book_id", "member_id", "loaned_at", "due_at", "returned_at"), [
        (1, 2, 1, "2024-06-01", "2024-06-22", None), (2, 3, 1, "2024-06-03", "2024-06-24", None),
        (3, 4, 2, "2024-06-05", "2024-06-26", None), (4, 5, 3, "2024-06-06", "2024-06-27", None),
        (5, 6, 1, "2024-04-01", "2024-04-22", "2024-04-20")]),
    "holds": (("id", "book_id", "member_id", "created_at", "status"), [(1, 5, 1, "2024-06-07", "active")]),
}


def verify_checkout(initial_db_path, final_db_path, final_answer=None):
    import sqlite3
    new = sqlite3.connect(final_db_path).execute(
        "SELECT book_id, member_id, loaned_at, due_at, returned_at FROM loans WHERE id > 5").fetchall()
    return {"result": "complete" if new == [(1, 1, "2024-06-15", "2024-07-06", None)] else "others"}


def verify_return(initial_db_path, final_db_path, final_answer=None):
    import sqlite3
    returned = dict(sqlite3.connect(final_db_path).execute("SELECT id, returned_at FROM loans").fetchall())
    expected = dict(sqlite3.connect(initial_db_path).execute("SELECT id, returned_at FROM loans").fetchall())
    expected[1] = "2024-06-15"
    return {"result": "complete" if returned == expected else "others"}


def verify_renew(initial_db_path, final_db_path, final_answer=None):
    import sqlite3
    due = dict(sqlite3.connect(final_db_path).execute("SELECT id, due_at FROM loans").fetchall())
    expected = dict(sqlite3.connect(initial_db_path).execute("SELECT id, due_at FROM loans").fetchall())
    expected[2] = "2024-07-08"
    return {"result": "complete" if due == expected else "others"}


def verify_hold(initial_db_path, final_db_path, final_answer=None):
    import sqlite3
    new = sqlite3.connect(final_db_path).execute(
        "SELECT book_id, member_id, status FROM holds WHERE id > 1").fetchall()
    return {"result": "complete" if new == [(4, 1, "active")] else "others"}


def verify_cancel_hold(initial_db_path, final_db_path, final_answer=None):
    import sqlite3
    holds = sqlite3.connect(final_db_path).execute("SELECT id, status FROM holds").fetchall()
    return {"result": "complete" if holds == [(1, "cancelled")] else "others"}


TASKS = [
    {"task": "Borrow 'The Left Hand of Darkness'.",
     "verify": verify_checkout,
     "gold": [("search_books", {"query": "Left Hand of Darkness"}), ("checkout_book", {"book_id": 1})],
     "answer": "You have borrowed The Left Hand of Darkness; it is due on 2024-07-06.",
     "wrong": [("checkout_book", {"book_id": 6})]},
    {"task": "I finished Dune. Return it.",
     "verify": verify_return,
     "gold": [("list_my_loans", {}), ("return_book", {"loan_id": 1})],
     "answer": "Dune is returned.",
     "wrong": [("return_book", {"loan_id": 2})]},
    {"task": "Renew my loan of 'Middlemarch'.",
     "verify": verify_renew,
     "gold": [("list_my_loans", {}), ("renew_loan", {"loan_id": 2})],
     "answer": "Middlemarch is renewed until 2024-07-08.",
     "wrong": [("renew_loan", {"loan_id": 1})]},
    {"task": "I want to read 'Piranesi' but all copies are out. Put a hold on it.",
     "verify": verify_hold,
     "gold": [("search_books", {"query": "Piranesi"}), ("place_hold", {"book_id": 4})],
     "answer": "You are on the hold list for Piranesi.",
     "wrong": [("search_books", {"query": "Piranesi"}), ("checkout_book", {"book_id": 4})]},
    {"task": "Cancel my hold on 'Circe'.",
     "verify": verify_cancel_hold,
     "gold": [("list_my_holds", {}), ("cancel_hold", {"hold_id": 1})],
     "answer": "Your hold on Circe is cancelled.",
     "wrong": [("list_my_holds", {}), ("place_hold", {"book_id": 5})]},
]
