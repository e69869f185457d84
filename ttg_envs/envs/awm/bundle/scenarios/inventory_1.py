"""Scenario inventory_1: schema, sample rows, tasks with verifiers and gold calls."""

NAME = "inventory_1"
DESCRIPTION = ("Inventory management for an office-supplies distributor with three warehouses (Berlin, Munich, "
               "Hamburg): product catalogue and prices, stock levels per warehouse, stock adjustments and "
               "transfers, suppliers and purchase orders.")

TABLES = [
    ("warehouses", "CREATE TABLE warehouses (\n    id INTEGER PRIMARY KEY,\n    name TEXT NOT NULL,\n    city TEXT NOT NULL\n);", []),
    ("products", "CREATE TABLE products (\n    id INTEGER PRIMARY KEY,\n    sku TEXT UNIQUE NOT NULL,\n    name TEXT NOT NULL,\n"
                 "    category TEXT NOT NULL,\n    unit_price REAL NOT NULL\n);", []),
    ("stock_levels", "CREATE TABLE stock_levels (\n    product_id INTEGER NOT NULL REFERENCES products(id),\n"
                     "    warehouse_id INTEGER NOT NULL REFERENCES warehouses(id),\n    quantity INTEGER NOT NULL,\n"
                     "    PRIMARY KEY (product_id, warehouse_id)\n);", []),
    ("stock_movements", "CREATE TABLE stock_movements (\n    id INTEGER PRIMARY KEY AUTOINCREMENT,\n    product_id INTEGER NOT NULL,\n"
                        "    warehouse_id INTEGER NOT NULL,\n    delta INTEGER NOT NULL,\n    reason TEXT NOT NULL,\n    created_at DATETIME NOT NULL\n);", []),
    ("suppliers", "CREATE TABLE suppliers (\n    id INTEGER PRIMARY KEY,\n    name TEXT NOT NULL,\n    email TEXT NOT NULL\n);", []),
    ("purchase_orders", "CREATE TABLE purchase_orders (\n    id INTEGER PRIMARY KEY AUTOINCREMENT,\n    supplier_id INTEGER NOT NULL REFERENCES suppliers(id),\n"
                        "    product_id INTEGER NOT NULL REFERENCES products(id),\n    quantity INTEGER NOT NULL,\n"
                        "    status TEXT NOT NULL,\n    created_at DATETIME NOT NULL\n);", []),
]

SAMPLE = {
    "warehouses": (("id", "name", "city"), [(1, "Berlin Central", "Berlin"), (2, "Munich South", "Munich"),
                                            (3, "Hamburg Port", "Hamburg")]),
    "products": (("id", "sku", "name", "category", "unit_price"), [
        (1, "HUB-7C", "USB-C Hub 7-port", "accessories", 39.9), (2, "CHR-ERG", "Ergo Office Chair", "furniture", 289.0),
        (3, "PAP-A4", "A4 Paper Ream (500 sheets)", "paper", 4.5), (4, "MSE-M2", "Wireless Mouse M2", "accessories", 19.99),
        (5, "DSK-FRM", "Standing Desk Frame", "furniture", 349.0), (6, "MON-27", "27-inch Monitor", "displays", 229.0),
        (7, "PAP-A3", "A3 Paper Ream (500 sheets)", "paper", 9.8)]),
    "stock_levels": (("product_id", "warehouse_id", "quantity"), [
        (1, 1, 120), (1, 2, 15), (1, 3, 40), (2, 1, 12), (2, 3, 9), (3, 1, 800), (3, 2, 450),
        (4, 1, 60), (4, 2, 25), (5, 1, 7), (5, 2, 4), (5, 3, 11), (6, 2, 30), (7, 3, 90)]),
    "stock_movements": (("id", "product_id", "warehouse_id", "delta", "reason", "created_at"), [
        (1, 1, 1, 120, "initial count", "2024-06-01 08:00:00"), (2, 5, 3, 11, "initial count", "2024-06-01 08:00:00")]),
    "suppliers": (("id", "name", "email"), [(1, "PaperCo", "orders@paperco.example"),
                                             (2, "Ergonomix", "sales@ergonomix.example"),
                                             (3, "CableWorld", "b2b@cableworld.example")]),
    "purchase_orders": (("id", "supplier_id", "product_id", "quantity", "status", "created_at"), [
        (1, 2, 2, 10, "received", "2024-05-02 10:00:00")]),
}


def verify_transfer(initial_db_path, final_db_path, final_answer=None):
    import sqlite3
    final = {(p, w): q for p, w, q in sqlite3.connect(final_db_path).execute("SELECT * FROM stock_levels")}
    expected = {(p, w): q for p, w, q in sqlite3.connect(initial_db_path).execute("SELECT * FROM stock_levels")}
    expected[(1, 1)] -= 20
    expected[(1, 2)] += 20
    return {"result": "complete" if final == expected else "others"}


def verify_damage(initial_db_path, final_db_path, final_answer=None):
    import sqlite3
    conn = sqlite3.connect(final_db_path)
    final = {(p, w): q for p, w, q in conn.execute("SELECT * FROM stock_levels")}
    expected = {(p, w): q for p, w, q in sqlite3.connect(initial_db_path).execute("SELECT * FROM stock_levels")}
    expected[(2, 3)] -= 3
    moves = conn.execute("SELECT product_id, warehouse_id, delta, reason FROM stock_movements WHERE id > 2").fetchall()
    ok = final == expected and moves == [(2, 3, -3, "damaged")]
    return {"result": "complete" if ok else "others"}


def verify_purchase_order(initial_db_path, final_db_path, final_answer=None):
    import sqlite3
    new = sqlite3.connect(final_db_path).execute(
        "SELECT supplier_id, product_id, quantity, status FROM purchase_orders WHERE id > 1").fetchall()
    return {"result": "complete" if new == [(1, 3, 100, "submitted")] else "others"}


def verify_price(initial_db_path, final_db_path, final_answer=None):
    import sqlite3
    prices = dict(sqlite3.connect(final_db_path).execute("SELECT id, unit_price FROM products").fetchall())
    expected = dict(sqlite3.connect(initial_db_path).execute("SELECT id, unit_price FROM products").fetchall())
    expected[4] = 24.99
    return {"result": "complete" if prices == expected else "others"}


def verify_total_question(initial_db_path, final_db_path, final_answer=None):
    import re
    import sqlite3
    unchanged = list(sqlite3.connect(initial_db_path).iterdump()) == list(sqlite3.connect(final_db_path).iterdump())
    ok = unchanged and re.findall(r"\d+", final_answer or "")[-1:] == ["22"]
    return {"result": "complete" if ok else "others"}


TASKS = [
    {"task": "Move 20 units of the 'USB-C Hub 7-port' from the Berlin warehouse to the Munich warehouse.",
     "verify": verify_transfer,
     "gold": [("search_products", {"query": "USB-C Hub"}), ("list_warehouses", {}),
              ("transfer_stock", {"product_id": 1, "from_warehouse_id": 1, "to_warehouse_id": 2, "quantity": 20})],
     "answer": "Moved 20 USB-C hubs from Berlin Central to Munich South.",
     "wrong": [("transfer_stock", {"product_id": 1, "from_warehouse_id": 1, "to_warehouse_id": 3, "quantity": 20})]},
    {"task": "Three 'Ergo Office Chair' units in the Hamburg warehouse were damaged. Remove them from stock with "
             "the reason 'damaged'.",
     "verify": verify_damage,
     "gold": [("search_products", {"query": "Ergo Office Chair"}), ("get_product_stock", {"product_id": 2}),
              ("adjust_stock", {"product_id": 2, "warehouse_id": 3, "delta": -3, "reason": "damaged"})],
     "answer": "Removed 3 damaged chairs from Hamburg Port; 6 remain.",
     "wrong": [("adjust_stock", {"product_id": 2, "warehouse_id": 1, "delta": -3, "reason": "damaged"})]},
    {"task": "Order 100 reams of 'A4 Paper Ream (500 sheets)' from the supplier PaperCo.",
     "verify": verify_purchase_order,
     "gold": [("search_products", {"query": "A4 Paper"}), ("list_suppliers", {}),
              ("create_purchase_order", {"supplier_id": 1, "product_id": 3, "quantity": 100})],
     "answer": "Purchase order for 100 A4 reams submitted to PaperCo.",
     "wrong": [("create_purchase_order", {"supplier_id": 1, "product_id": 7, "quantity": 100})]},
    {"task": "Change the price of the 'Wireless Mouse M2' to 24.99.",
     "verify": verify_price,
     "gold": [("search_products", {"query": "Wireless Mouse"}), ("update_product_price", {"product_id": 4, "unit_price": 24.99})],
     "answer": "The Wireless Mouse M2 now costs 24.99.",
     "wrong": [("update_product_price", {"product_id": 4, "unit_price": 24.9})]},
    {"task": "How many 'Standing Desk Frame' units are in stock across all warehouses? Reply with the number.",
     "verify": verify_total_question,
     "gold": [("search_products", {"query": "Standing Desk"}), ("get_product_stock", {"product_id": 5})],
     "answer": "There are 22 Standing Desk Frames in stock.",
     "wrong": [("adjust_stock", {"product_id": 5, "warehouse_id": 1, "delta": 1, "reason": "recount"})]},
]
