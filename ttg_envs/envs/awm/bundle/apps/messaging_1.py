"""Team messaging: channels, members, messages, pins and direct messages (user 1 is signed in)."""


from fastapi import FastAPI, HTTPException, Query
from pydantic import BaseModel
from sqlalchemy import create_engine, text

DATABASE_URL = "sqlite:///./outputs/databases/messaging_1.db"
engine = create_engine(DATABASE_URL, connect_args={"check_same_thread": False})
app = FastAPI(title="Team Chat API")
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


def require_channel(channel_id: int):
    channel = fetch_one("SELECT * FROM channels WHERE id = :id", id=channel_id)
    if channel is None:
        raise HTTPException(status_code=404, detail="Channel not found")
    return channel


def is_member(channel_id: int, user_id: int) -> bool:
    return fetch_one("SELECT 1 AS x FROM channel_members WHERE channel_id = :c AND user_id = :u",
                     c=channel_id, u=user_id) is not None


class ChannelCreate(BaseModel):
    name: str
    topic: str = ""
    is_private: bool = False


class TopicUpdate(BaseModel):
    topic: str


class MemberAdd(BaseModel):
    user_id: int


class MessageCreate(BaseModel):
    body: str


class DirectMessageCreate(BaseModel):
    recipient_id: int
    body: str


@app.get("/api/channels", operation_id="list_channels", tags=["channels"],
         summary="List public channels and the private channels the current user belongs to")
def list_channels():
    return {"channels": fetch_all(
        "SELECT c.*, EXISTS(SELECT 1 FROM channel_members m WHERE m.channel_id = c.id AND m.user_id = :u) AS is_member "
        "FROM channels c WHERE c.is_private = 0 OR EXISTS(SELECT 1 FROM channel_members m WHERE m.channel_id = c.id "
        "AND m.user_id = :u) ORDER BY c.name", u=CURRENT_USER_ID)}


@app.get("/api/channels/by-name/{name}", operation_id="get_channel_by_name", tags=["channels"],
         summary="Get a channel by its name (without the #)")
def get_channel_by_name(name: str):
    channel = fetch_one("SELECT * FROM channels WHERE name = :n", n=name.lstrip("#"))
    if channel is None or (channel["is_private"] and not is_member(channel["id"], CURRENT_USER_ID)):
        raise HTTPException(status_code=404, detail="Channel not found")
    channel["members"] = fetch_all("SELECT u.id, u.name FROM channel_members m JOIN users u ON u.id = m.user_id "
                                   "WHERE m.channel_id = :c ORDER BY u.id", c=channel["id"])
    return channel


@app.post("/api/channels", operation_id="create_channel", tags=["channels"],
          summary="Create a channel; the current user becomes its first member")
def create_channel(payload: ChannelCreate):
    name = payload.name.lstrip("#").strip().lower()
    if not name or fetch_one("SELECT id FROM channels WHERE name = :n", n=name):
        raise HTTPException(status_code=409, detail="A channel with this name already exists")
    channel_id = execute("INSERT INTO channels (name, topic, is_private, created_by, created_at) "
                         "VALUES (:n, :t, :p, :u, :now)", n=name, t=payload.topic, p=int(payload.is_private),
                         u=CURRENT_USER_ID, now=NOW)
    execute("INSERT INTO channel_members (channel_id, user_id, joined_at) VALUES (:c, :u, :now)",
            c=channel_id, u=CURRENT_USER_ID, now=NOW)
    return require_channel(channel_id)


@app.put("/api/channels/{channel_id}/topic", operation_id="set_channel_topic", tags=["channels"],
         summary="Set a channel's topic")
def set_channel_topic(channel_id: int, payload: TopicUpdate):
    require_channel(channel_id)
    execute("UPDATE channels SET topic = :t WHERE id = :id", t=payload.topic, id=channel_id)
    return require_channel(channel_id)


@app.post("/api/channels/{channel_id}/members", operation_id="add_channel_member", tags=["channels"],
          summary="Add a user to a channel the current user belongs to")
def add_channel_member(channel_id: int, payload: MemberAdd):
    require_channel(channel_id)
    if not is_member(channel_id, CURRENT_USER_ID):
        raise HTTPException(status_code=403, detail="You are not a member of this channel")
    if fetch_one("SELECT id FROM users WHERE id = :id", id=payload.user_id) is None:
        raise HTTPException(status_code=404, detail="User not found")
    if not is_member(channel_id, payload.user_id):
        execute("INSERT INTO channel_members (channel_id, user_id, joined_at) VALUES (:c, :u, :now)",
                c=channel_id, u=payload.user_id, now=NOW)
    return {"channel_id": channel_id, "user_id": payload.user_id, "member": True}


@app.get("/api/channels/{channel_id}/messages", operation_id="list_channel_messages", tags=["messages"],
         summary="Latest messages of a channel, newest first")
def list_channel_messages(channel_id: int, limit: int = Query(20, description="How many messages")):
    channel = require_channel(channel_id)
    if channel["is_private"] and not is_member(channel_id, CURRENT_USER_ID):
        raise HTTPException(status_code=404, detail="Channel not found")
    return {"messages": fetch_all("SELECT m.*, u.name AS sender_name FROM messages m JOIN users u ON u.id = m.sender_id "
                                  "WHERE m.channel_id = :c ORDER BY m.created_at DESC, m.id DESC LIMIT :l",
                                  c=channel_id, l=limit)}


@app.post("/api/channels/{channel_id}/messages", operation_id="post_message", tags=["messages"],
          summary="Post a message to a channel the current user belongs to")
def post_message(channel_id: int, payload: MessageCreate):
    require_channel(channel_id)
    if not is_member(channel_id, CURRENT_USER_ID):
        raise HTTPException(status_code=403, detail="Join the channel before posting")
    message_id = execute("INSERT INTO messages (channel_id, recipient_id, sender_id, body, pinned, created_at) "
                         "VALUES (:c, NULL, :u, :b, 0, :now)", c=channel_id, u=CURRENT_USER_ID, b=payload.body, now=NOW)
    return fetch_one("SELECT * FROM messages WHERE id = :id", id=message_id)


@app.post("/api/messages/{message_id}/pin", operation_id="pin_message", tags=["messages"],
          summary="Pin a channel message")
def pin_message(message_id: int):
    message = fetch_one("SELECT * FROM messages WHERE id = :id", id=message_id)
    if message is None or message["channel_id"] is None:
        raise HTTPException(status_code=404, detail="Message not found")
    execute("UPDATE messages SET pinned = 1 WHERE id = :id", id=message_id)
    return fetch_one("SELECT * FROM messages WHERE id = :id", id=message_id)


@app.get("/api/users/search", operation_id="search_users", tags=["users"],
         summary="Find users by name or handle")
def search_users(query: str = Query(..., description="Part of a name or handle")):
    pattern = f"%{query}%"
    return {"users": fetch_all("SELECT id, name, handle FROM users WHERE name LIKE :p OR handle LIKE :p ORDER BY id",
                               p=pattern)}


@app.post("/api/direct-messages", operation_id="send_direct_message", tags=["messages"],
          summary="Send a direct message to a user")
def send_direct_message(payload: DirectMessageCreate):
    if fetch_one("SELECT id FROM users WHERE id = :id", id=payload.recipient_id) is None:
        raise HTTPException(status_code=404, detail="User not found")
    message_id = execute("INSERT INTO messages (channel_id, recipient_id, sender_id, body, pinned, created_at) "
                         "VALUES (NULL, :r, :u, :b, 0, :now)", r=payload.recipient_id, u=CURRENT_USER_ID,
                         b=payload.body, now=NOW)
    return fetch_one("SELECT * FROM messages WHERE id = :id", id=message_id)


if __name__ == "__main__":
    import uvicorn

    uvicorn.run(app, host="127.0.0.1", port=8001)
