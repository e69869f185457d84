"""Warehouse inventory: products, stock per warehouse, stock movements, suppliers and purchase orders."""


from fastapi import FastAPI, HTTPException, Query
from pydantic import BaseModel
from sqlalchemy import create_engine, text

DATABASE_URL = "sqlite:///./outputs/databases/inventory_1.db"
engine = create_engine(DATABASE_URL, connect_args={"check_same_thread": False})
app = FastAPI(title="Inventory API")
CURRENT_USER_ID = 1
NOW = "2024-06-15 09:00:00"


def fetch_all(sql: str, **params):
    with engine.connect() as conn:
        return [dict(row._mapping) for row in conn.execute(text(sql), params)]


def fetch_one(sql: str, **params):
    rows = fetch_all(sql, **params)
    return rows[0] if rows else None


def execute(sql: str, **params) -> int:
    with engine.begin() as conn:
        return conn.execute(text(sql), params).lastrowid


def quantity(product_id: int, warehouse_id: int) -> int:
    row = fetch_one("SELECT quantity FROM stock_levels WHERE product_id = :p AND warehouse_id = :w",
                    p=product_id, w=warehouse_id)
    return row["quantity"] if row else 0


def change_stock(product_id: int, warehouse_id: int, delta: int, reason: str) -> None:
    if fetch_one("SELECT id FROM products WHERE id = :id", id=product_id) is None:
        raise HTTPException(status_code=404, detail="Product not found")
    if fetch_one("SELECT id FROM warehouses WHERE id = :id", id=warehouse_id) is None:
        raise HTTPException(status_code=404, detail="Warehouse not found")
    new = quantity(product_id, warehouse_id) + delta
    if new < 0:
        raise HTTPException(status_code=409, detail="Not enough stock in this warehouse")
    with engine.begin() as conn:
        conn.execute(text("INSERT INTO stock_levels (product_id, warehouse_id, quantity) VALUES (:p, :w, :q) "
                          "ON CONFLICT(product_id, warehouse_id) DO UPDATE SET quantity = :q"),
                     {"p": product_id, "w": warehouse_id, "q": new})
        conn.execute(text("INSERT INTO stock_movements (product_id, warehouse_id, delta, reason, created_at) "
                          "VALUES (:p, :w, :d, :r, :now)"),
                     {"p": product_id, "w": warehouse_id, "d": delta, "r": reason, "now": NOW})


class StockAdjustment(BaseModel):
    warehouse_id: int
    delta: int
    reason: str


class StockTransfer(BaseModel):
    from_warehouse_id: int
    to_warehouse_id: int
    quantity: int


class PurchaseOrderCreate(BaseModel):
    supplier_id: int
    product_id: int
    quantity: int


class PriceUpdate(BaseModel):
    unit_price: float


@app.get("/api/products/search", operation_id="search_products", tags=["products"],
         summary="Search products by name, SKU or category")
def search_products(query: str = Query(..., description="Part of a name, SKU or category")):
    pattern = f"%{query}%"
    return {"products": fetch_all("SELECT * FROM products WHERE name LIKE :p OR sku LIKE :p OR category LIKE :p "
                                  "ORDER BY name", p=pattern)}


@app.get("/api/products/{product_id}/stock", operation_id="get_product_stock", tags=["stock"],
         summary="Stock of a product in every warehouse")
def get_product_stock(product_id: int):
    if fetch_one("SELECT id FROM products WHERE id = :id", id=product_id) is None:
        raise HTTPException(status_code=404, detail="Product not found")
    levels = fetch_all("SELECT w.id AS warehouse_id, w.name AS warehouse, s.quantity FROM stock_levels s "
                       "JOIN warehouses w ON w.id = s.warehouse_id WHERE s.product_id = :p ORDER BY w.id", p=product_id)
    return {"product_id": product_id, "levels": levels}


@app.get("/api/warehouses", operation_id="list_warehouses", tags=["stock"], summary="List warehouses")
def list_warehouses():
    return {"warehouses": fetch_all("SELECT * FROM warehouses ORDER BY id")}


@app.post("/api/products/{product_id}/adjustments", operation_id="adjust_stock", tags=["stock"],
          summary="Add (positive delta) or remove (negative delta) stock in one warehouse, with a reason")
def adjust_stock(product_id: int, payload: StockAdjustment):
    change_stock(product_id, payload.warehouse_id, payload.delta, payload.reason)
    return {"product_id": product_id, "warehouse_id": payload.warehouse_id,
            "quantity": quantity(product_id, payload.warehouse_id)}


@app.post("/api/products/{product_id}/transfers", operation_id="transfer_stock", tags=["stock"],
          summary="Move units of a product from one warehouse to another")
def transfer_stock(product_id: int, payload: StockTransfer):
    if payload.quantity <= 0 or payload.from_warehouse_id == payload.to_warehouse_id:
        raise HTTPException(status_code=422, detail="quantity must be positive and the warehouses different")
    change_stock(product_id, payload.from_warehouse_id, -payload.quantity, "transfer")
    change_stock(product_id, payload.to_warehouse_id, payload.quantity, "transfer")
    return get_product_stock(product_id)


@app.get("/api/suppliers", operation_id="list_suppliers", tags=["purchasing"], summary="List suppliers")
def list_suppliers():
    return {"suppliers": fetch_all("SELECT * FROM suppliers ORDER BY id")}


@app.post("/api/purchase-orders", operation_id="create_purchase_order", tags=["purchasing"],
          summary="Order units of a product from a supplier")
def create_purchase_order(payload: PurchaseOrderCreate):
    if payload.quantity <= 0:
        raise HTTPException(status_code=422, detail="quantity must be positive")
    if fetch_one("SELECT id FROM suppliers WHERE id = :id", id=payload.supplier_id) is None:
        raise HTTPException(status_code=404, detail="Supplier not found")
    if fetch_one("SELECT id FROM products WHERE id = :id", id=payload.product_id) is None:
        raise HTTPException(status_code=404, detail="Product not found")
    order_id = execute("INSERT INTO purchase_orders (supplier_id, product_id, quantity, status, created_at) "
                       "VALUES (:s, :p, :q, 'submitted', :now)", s=payload.supplier_id, p=payload.product_id,
                       q=payload.quantity, now=NOW)
    return fetch_one("SELECT * FROM purchase_orders WHERE id = :id", id=order_id)


@app.put("/api/products/{product_id}/price", operation_id="update_product_price", tags=["products"],
         summary="Set a product's unit price")
def update_product_price(product_id: int, payload: PriceUpdate):
    if fetch_one("SELECT id FROM products WHERE id = :id", id=product_id) is None:
        raise HTTPException(status_code=404, detail="Product not found")
    execute("UPDATE products SET unit_price = :u WHERE id = :id", u=round(payload.unit_price, 2), id=product_id)
    return fetch_one("SELECT * FROM products WHERE id = :id", id=product_id)


if __name__ == "__main__":
    import uvicorn

    uvicorn.run(app, host="127.0.0.1", port=8001)
