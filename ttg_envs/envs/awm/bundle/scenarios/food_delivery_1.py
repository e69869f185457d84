"""Scenario food_delivery_1: schema, sample rows, tasks with verifiers and gold calls."""

NAME = "food_delivery_1"
DESCRIPTION = ("A food delivery app: browse restaurants and menus, keep delivery addresses, build an order as a "
               "cart, add items, place it with an optional tip, and cancel orders that are not delivered yet.")

TABLES = [
    ("restaurants", "CREATE TABLE restaurants (\n    id INTEGER PRIMARY KEY,\n    name TEXT NOT NULL,\n    cuisine TEXT NOT NULL,\n"
                    "    rating REAL NOT NULL,\n    is_open INTEGER NOT NULL\n);", []),
    ("menu_items", "CREATE TABLE menu_items (\n    id INTEGER PRIMARY KEY,\n    restaurant_id INTEGER NOT NULL REFERENCES restaurants(id),\n"
                   "    name TEXT NOT NULL,\n    price REAL NOT NULL,\n    is_available INTEGER NOT NULL DEFAULT 1\n);", []),
    ("addresses", "CREATE TABLE addresses (\n    id INTEGER PRIMARY KEY AUTOINCREMENT,\n    user_id INTEGER NOT NULL,\n    label TEXT NOT NULL,\n"
                  "    street TEXT NOT NULL,\n    city TEXT NOT NULL,\n    is_default INTEGER NOT NULL DEFAULT 0\n);", []),
    ("orders", "CREATE TABLE orders (\n    id INTEGER PRIMARY KEY AUTOINCREMENT,\n    user_id INTEGER NOT NULL,\n"
               "    restaurant_id INTEGER NOT NULL REFERENCES restaurants(id),\n    address_id INTEGER NOT NULL REFERENCES addresses(id),\n"
               "    status TEXT NOT NULL,\n    total REAL NOT NULL,\n    tip REAL NOT NULL,\n    created_at DATETIME NOT NULL\n);", []),
    ("order_items", "CREATE TABLE order_items (\n    id INTEGER PRIMARY KEY AUTOINCREMENT,\n    order_id INTEGER NOT NULL REFERENCES orders(id),\n"
                    "    menu_item_id INTEGER NOT NULL REFERENCES menu_items(id),\n    quantity INTEGER NOT NULL,\n    unit_price REAL NOT NULL\n);", []),
]

SAMPLE = {
    "restaurants": (("id", "name", "cuisine", "rating", "is_open"), [
        (1, "Luigi's Trattoria", "italian", 4.6, 1), (2, "Bangkok Street Kitchen", "thai", 4.4, 1),
        (3, "Curry Corner", "indian", 4.1, 1), (4, "Nonna's Pizza", "italian", 4.2, 0)]),
    "menu_items": (("id", "restaurant_id", "name", "price", "is_available"), [
        (1, 1, "Margherita", 9.5, 1), (2, 1, "Quattro Formaggi", 12.0, 1), (3, 1, "Tiramisu", 6.0, 1),
        (4, 2, "Pad Thai", 11.5, 1), (5, 2, "Spring Rolls", 5.5, 1), (6, 2, "Green Curry", 12.5, 0),
        (7, 3, "Butter Chicken", 13.0, 1), (8, 3, "Garlic Naan", 3.0, 1), (9, 4, "Margherita", 8.0, 1)]),
    "addresses": (("id", "user_id", "label", "street", "city", "is_default"), [
        (1, 1, "Home", "Lindenstrasse 4", "Berlin", 1), (2, 1, "Work", "Friedrichstrasse 120", "Berlin", 0),
        (3, 2, "Home", "Oranienstrasse 9", "Berlin", 1)]),
    "orders": (("id", "user_id", "restaurant_id", "address_id", "status", "total", "tip", "created_at"), [
        (1, 1, 3, 1, "delivered", 32.0, 3.0, "2024-06-10 20:00:00"),
        (2, 1, 2, 2, "delivered", 17.0, 0.0, "2024-06-12 12:30:00"),
        (3, 1, 1, 1, "placed", 21.5, 2.5, "2024-06-15 18:40:00"),
        (4, 2, 1, 3, "delivered", 19.0, 0.0, "2024-06-13 19:00:00")]),
    "order_items": (("id", "order_id", "menu_item_id", "quantity", "unit_price"), [
        (1, 1, 7, 2, 13.0), (2, 1, 8, 1, 3.0), (3, 2, 4, 1, 11.5), (4, 2, 5, 1, 5.5), (5, 3, 1, 2, 9.5),
        (6, 4, 1, 2, 9.5)]),
}


def verify_margherita_order(initial_db_path, final_db_path, final_answer=None):
    import sqlite3
    conn = sqlite3.connect(final_db_path)
    orders = conn.execute("SELECT id, restaurant_id, address_id, status, total FROM orders WHERE id > 4").fetchall()
    if [o[1:] for o in orders] != [(1, 1, "placed", 19.0)]:
        return {"result": "others"}
    items = conn.execute("SELECT menu_item_id, quantity FROM order_items WHERE order_id = ?", (orders[0][0],)).fetchall()
    return {"result": "complete" if items == [(1, 2)] else "others"}


def verify_cancel(initial_db_path, final_db_path, final_answer=None):
    import sqlite3
    status = dict(sqlite3.connect(final_db_path).execute("SELECT id, status FROM orders").fetchall())
    expected = dict(sqlite3.connect(initial_db_path).execute("SELECT id, status FROM orders").fetchall())
    expected[3] = "cancelled"
    return {"result": "complete" if status == expected else "others"}


def verify_address(initial_db_path, final_db_path, final_answer=None):
    import sqlite3
    conn = sqlite3.connect(final_db_path)
    new = conn.execute("SELECT user_id, label, street, city, is_default FROM addresses WHERE id > 3").fetchall()
    defaults = conn.execute("SELECT id FROM addresses WHERE is_default = 1 AND user_id = 1").fetchall()
    ok = new == [(1, "Studio", "Kastanienallee 12", "Berlin", 0)] and defaults == [(1,)]
    return {"result": "complete" if ok else "others"}


def verify_thai_order(initial_db_path, final_db_path, final_answer=None):
    import sqlite3
    conn = sqlite3.connect(final_db_path)
    orders = conn.execute("SELECT id, restaurant_id, address_id, status, tip, total FROM orders WHERE id > 4").fetchall()
    if [o[1:] for o in orders] != [(2, 2, "placed", 3.0, 20.0)]:
        return {"result": "others"}
    items = sorted(conn.execute("SELECT menu_item_id, quantity FROM order_items WHERE order_id = ?", (orders[0][0],)).fetchall())
    return {"result": "complete" if items == [(4, 1), (5, 1)] else "others"}


def verify_total_question(initial_db_path, final_db_path, final_answer=None):
    import re
    import sqlite3
    unchanged = list(sqlite3.connect(initial_db_path).iterdump()) == list(sqlite3.connect(final_db_path).iterdump())
    amounts = [float(x) for x in re.findall(r"\d+(?:\.\d+)?", final_answer or "")]
    return {"result": "complete" if unchanged and amounts[-1:] == [17.0] else "others"}


TASKS = [
    {"task": "Order two Margherita pizzas from Luigi's Trattoria to my Home address, no tip.",
     "verify": verify_margherita_order,
     "gold": [("search_restaurants", {"query": "Luigi"}), ("get_menu", {"restaurant_id": 1}), ("list_addresses", {}),
              ("create_order", {"restaurant_id": 1, "address_id": 1}),
              ("add_order_item", {"order_id": 5, "menu_item_id": 1, "quantity": 2}), ("place_order", {"order_id": 5, "tip": 0})],
     "answer": "Placed: two Margherita pizzas from Luigi's Trattoria to Home, 19.00 in total.",
     "wrong": [("create_order", {"restaurant_id": 1, "address_id": 2}),
               ("add_order_item", {"order_id": 5, "menu_item_id": 1, "quantity": 2}), ("place_order", {"order_id": 5, "tip": 0})]},
    {"task": "Cancel my order that has been placed but not delivered yet.",
     "verify": verify_cancel,
     "gold": [("list_orders", {"status": "placed"}), ("cancel_order", {"order_id": 3})],
     "answer": "Order 3 from Luigi's Trattoria is cancelled.",
     "wrong": [("list_orders", {"status": "placed"}),
               ("add_address", {"label": "Temp", "street": "Lindenstrasse 4", "city": "Berlin"})]},
    {"task": "Save a new delivery address labelled 'Studio' at Kastanienallee 12, Berlin. Keep Home as the default.",
     "verify": verify_address,
     "gold": [("add_address", {"label": "Studio", "street": "Kastanienallee 12", "city": "Berlin", "is_default": False})],
     "answer": "Saved the Studio address; Home is still the default.",
     "wrong": [("add_address", {"label": "Studio", "street": "Kastanienallee 12", "city": "Berlin", "is_default": True})]},
    {"task": "Order one Pad Thai and one portion of Spring Rolls from Bangkok Street Kitchen to my Work address "
             "with a 3 euro tip.",
     "verify": verify_thai_order,
     "gold": [("search_restaurants", {"cuisine": "thai"}), ("get_menu", {"restaurant_id": 2}), ("list_addresses", {}),
              ("create_order", {"restaurant_id": 2, "address_id": 2}),
              ("add_order_item", {"order_id": 5, "menu_item_id": 4, "quantity": 1}),
              ("add_order_item", {"order_id": 5, "menu_item_id": 5, "quantity": 1}), ("place_order", {"order_id": 5, "tip": 3})],
     "answer": "Placed the order to Work: Pad Thai and Spring Rolls plus a 3 euro tip, 20.00 in total.",
     "wrong": [("create_order", {"restaurant_id": 2, "address_id": 2}),
               ("add_order_item", {"order_id": 5, "menu_item_id": 4, "quantity": 1}), ("place_order", {"order_id": 5, "tip": 3})]},
    {"task": "What was the total of my most recent delivered order?",
     "verify": verify_total_question,
     "gold": [("list_orders", {"status": "delivered"})],
     "answer": "Your most recent delivered order (Bangkok Street Kitchen) came to 17.00.",
     "wrong": [("cancel_order", {"order_id": 3})]},
]
