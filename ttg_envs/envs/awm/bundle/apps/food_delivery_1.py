"""Food delivery: restaurants, menus, delivery addresses and orders (user 1 is signed in)."""


from fastapi import FastAPI, HTTPException, Query
from pydantic import BaseModel
from sqlalchemy import create_engine, text

DATABASE_URL = "sqlite:///./outputs/databases/food_delivery_1.db"
engine = create_engine(DATABASE_URL, connect_args={"check_same_thread": False})
app = FastAPI(title="Food Delivery API")
CURRENT_USER_ID = 1
NOW = "2024-06-15 19:00:00"


def fetch_all(sql: str, **params):
    with engine.connect() as conn:
        return [dict(row._mapping) for row in conn.execute(text(sql), params)]


def fetch_one(sql: str, **params):
    rows = fetch_all(sql, **params)
    return rows[0] if rows else None


def execute(sql: str, **params) -> int:
    with engine.begin() as conn:
        return conn.execute(text(sql), params).lastrowid


def my_order(order_id: int):
    order = fetch_one("SELECT * FROM orders WHERE id = :id AND user_id = :u", id=order_id, u=CURRENT_USER_ID)
    if order is None:
        raise HTTPException(status_code=404, detail="Order not found")
    order["items"] = fetch_all("SELECT oi.menu_item_id, m.name, oi.quantity, oi.unit_price FROM order_items oi "
                               "JOIN menu_items m ON m.id = oi.menu_item_id WHERE oi.order_id = :id ORDER BY oi.id",
                               id=order_id)
    return order


class OrderCreate(BaseModel):
    restaurant_id: int
    address_id: int


class OrderItemAdd(BaseModel):
    menu_item_id: int
    quantity: int = 1


class OrderPlacement(BaseModel):
    tip: float = 0.0


class AddressCreate(BaseModel):
    label: str
    street: str
    city: str
    is_default: bool = False


@app.get("/api/restaurants", operation_id="search_restaurants", tags=["restaurants"],
         summary="Find open and closed restaurants by name or cuisine")
def search_restaurants(query: str | None = Query(None, description="Part of the name"),
                       cuisine: str | None = Query(None, description="e.g. italian, thai, indian")):
    sql = "SELECT * FROM restaurants WHERE 1=1"
    if query:
        sql += " AND name LIKE :q"
    if cuisine:
        sql += " AND cuisine = :c"
    return {"restaurants": fetch_all(sql + " ORDER BY rating DESC", q=f"%{query}%", c=cuisine)}


@app.get("/api/restaurants/{restaurant_id}/menu", operation_id="get_menu", tags=["restaurants"],
         summary="A restaurant's menu with prices")
def get_menu(restaurant_id: int):
    if fetch_one("SELECT id FROM restaurants WHERE id = :id", id=restaurant_id) is None:
        raise HTTPException(status_code=404, detail="Restaurant not found")
    return {"items": fetch_all("SELECT * FROM menu_items WHERE restaurant_id = :r ORDER BY id", r=restaurant_id)}


@app.get("/api/addresses", operation_id="list_addresses", tags=["account"], summary="Your delivery addresses")
def list_addresses():
    return {"addresses": fetch_all("SELECT * FROM addresses WHERE user_id = :u ORDER BY id", u=CURRENT_USER_ID)}


@app.post("/api/addresses", operation_id="add_address", tags=["account"], summary="Save a new delivery address")
def add_address(payload: AddressCreate):
    with engine.begin() as conn:
        if payload.is_default:
            conn.execute(text("UPDATE addresses SET is_default = 0 WHERE user_id = :u"), {"u": CURRENT_USER_ID})
        address_id = conn.execute(text("INSERT INTO addresses (user_id, label, street, city, is_default) VALUES "
                                       "(:u, :l, :s, :c, :d)"), {"u": CURRENT_USER_ID, "l": payload.label,
                                                                 "s": payload.street, "c": payload.city,
                                                                 "d": int(payload.is_default)}).lastrowid
    return fetch_one("SELECT * FROM addresses WHERE id = :id", id=address_id)


@app.get("/api/orders", operation_id="list_orders", tags=["orders"],
         summary="Your orders, newest first, optionally by status (cart, placed, delivered, cancelled)")
def list_orders(status: str | None = Query(None, description="cart, placed, delivered or cancelled")):
    sql = "SELECT o.*, r.name AS restaurant FROM orders o JOIN restaurants r ON r.id = o.restaurant_id WHERE o.user_id = :u"
    if status:
        sql += " AND o.status = :s"
    return {"orders": fetch_all(sql + " ORDER BY o.created_at DESC", u=CURRENT_USER_ID, s=status)}


@app.post("/api/orders", operation_id="create_order", tags=["orders"],
          summary="Start an order (a cart) at a restaurant for one of your addresses")
def create_order(payload: OrderCreate):
    restaurant = fetch_one("SELECT * FROM restaurants WHERE id = :id", id=payload.restaurant_id)
    if restaurant is None:
        raise HTTPException(status_code=404, detail="Restaurant not found")
    if not restaurant["is_open"]:
        raise HTTPException(status_code=409, detail="The restaurant is closed")
    if fetch_one("SELECT id FROM addresses WHERE id = :id AND user_id = :u", id=payload.address_id,
                 u=CURRENT_USER_ID) is None:
        raise HTTPException(status_code=404, detail="Address not found")
    order_id = execute("INSERT INTO orders (user_id, restaurant_id, address_id, status, total, tip, created_at) "
                       "VALUES (:u, :r, :a, 'cart', 0, 0, :now)", u=CURRENT_USER_ID, r=payload.restaurant_id,
                       a=payload.address_id, now=NOW)
    return my_order(order_id)


@app.post("/api/orders/{order_id}/items", operation_id="add_order_item", tags=["orders"],
          summary="Add a menu item to an order that is still a cart")
def add_order_item(order_id: int, payload: OrderItemAdd):
    order = my_order(order_id)
    if order["status"] != "cart":
        raise HTTPException(status_code=409, detail="Only carts can be changed")
    item = fetch_one("SELECT * FROM menu_items WHERE id = :id AND restaurant_id = :r", id=payload.menu_item_id,
                     r=order["restaurant_id"])
    if item is None or not item["is_available"] or payload.quantity <= 0:
        raise HTTPException(status_code=422, detail="Item not on this restaurant's menu or quantity invalid")
    execute("INSERT INTO order_items (order_id, menu_item_id, quantity, unit_price) VALUES (:o, :m, :q, :p)",
            o=order_id, m=payload.menu_item_id, q=payload.quantity, p=item["price"])
    return my_order(order_id)


@app.post("/api/orders/{order_id}/place", operation_id="place_order", tags=["orders"],
          summary="Place a cart; the total is the items plus the tip")
def place_order(order_id: int, payload: OrderPlacement):
    order = my_order(order_id)
    if order["status"] != "cart" or not order["items"]:
        raise HTTPException(status_code=409, detail="Only a non-empty cart can be placed")
    total = round(sum(i["quantity"] * i["unit_price"] for i in order["items"]) + payload.tip, 2)
    execute("UPDATE orders SET status = 'placed', tip = :t, total = :total WHERE id = :id", t=payload.tip,
            total=total, id=order_id)
    return my_order(order_id)


@app.post("/api/orders/{order_id}/cancel", operation_id="cancel_order", tags=["orders"],
          summary="Cancel an order that is a cart or placed but not yet delivered")
def cancel_order(order_id: int):
    if my_order(order_id)["status"] not in ("cart", "placed"):
        raise HTTPException(status_code=409, detail="This order can no longer be cancelled")
    execute("UPDATE orders SET status = 'cancelled' WHERE id = :id", id=order_id)
    return my_order(order_id)


if __name__ == "__main__":
    import uvicorn

    uvicorn.run(app, host="127.0.0.1", port=8001)
