"""Scenario messaging_1: schema, sample rows, tasks with verifiers and gold calls."""

NAME = "messaging_1"
DESCRIPTION = ("A team chat workspace like Slack: public and private channels with topics and members, "
               "messages that can be pinned, and direct messages between colleagues.")

TABLES = [
    ("users", "CREATE TABLE users (\n    id INTEGER PRIMARY KEY,\n    name TEXT NOT NULL,\n    handle TEXT UNIQUE NOT NULL,\n    email TEXT NOT NULL\n);", []),
    ("channels", "CREATE TABLE channels (\n    id INTEGER PRIMARY KEY AUTOINCREMENT,\n    name TEXT UNIQUE NOT NULL,\n    topic TEXT NOT NULL DEFAULT '',\n"
                 "    is_private INTEGER NOT NULL DEFAULT 0,\n    created_by INTEGER NOT NULL REFERENCES users(id),\n    created_at DATETIME NOT NULL\n);", []),
    ("channel_members", "CREATE TABLE channel_members (\n    channel_id INTEGER NOT NULL REFERENCES channels(id),\n"
                        "    user_id INTEGER NOT NULL REFERENCES users(id),\n    joined_at DATETIME NOT NULL,\n    PRIMARY KEY (channel_id, user_id)\n);", []),
    ("messages", "CREATE TABLE messages (\n    id INTEGER PRIMARY KEY AUTOINCREMENT,\n    channel_id INTEGER REFERENCES channels(id),\n"
                 "    recipient_id INTEGER REFERENCES users(id),\n    sender_id INTEGER NOT NULL REFERENCES users(id),\n    body TEXT NOT NULL,\n"
                 "    pinned INTEGER NOT NULL DEFAULT 0,\n    created_at DATETIME NOT NULL\n);",
     ["CREATE INDEX idx_messages_channel ON messages(channel_id, created_at);"]),
]

SAMPLE = {
    "users": (("id", "name", "handle", "email"), [
        (1, "Alex Kim", "alex", "alex@example.com"), (2, "Ana Souza", "ana", "ana@example.com"),
        (3, "Tom Becker", "tom", "tom@example.com"), (4, "Lena Vogt", "lena", "lena@example.com"),
        (5, "Raj Patel", "raj", "raj@example.com")]),
    "channels": (("id", "name", "topic", "is_private", "created_by", "created_at"), [
        (1, "general", "Company-wide announcements", 0, 2, "2023-01-10 09:00:00"),
        (2, "random", "Water cooler", 0, 2, "2023-01-10 09:05:00"),
        (3, "design", "Design reviews and critiques", 0, 4, "2023-03-02 13:00:00"),
        (4, "release-planning", "Release dates and freeze windows", 1, 3, "2024-02-01 10:00:00")]),
    "channel_members": (("channel_id", "user_id", "joined_at"), [
        (1, 1, "2023-01-10 09:00:00"), (1, 2, "2023-01-10 09:00:00"), (1, 3, "2023-01-10 09:00:00"),
        (1, 4, "2023-01-10 09:00:00"), (1, 5, "2023-01-10 09:00:00"), (2, 1, "2023-01-11 09:00:00"),
        (2, 2, "2023-01-10 09:05:00"), (3, 1, "2023-03-02 13:00:00"), (3, 2, "2023-03-02 13:00:00"),
        (3, 4, "2023-03-02 13:00:00"), (4, 3, "2024-02-01 10:00:00"), (4, 5, "2024-02-01 10:00:00")]),
    "messages": (("id", "channel_id", "recipient_id", "sender_id", "body", "pinned", "created_at"), [
        (1, 1, None, 2, "Welcome to the new workspace!", 1, "2024-06-10 09:00:00"),
        (2, 3, None, 2, "First draft of the onboarding screens is in Figma.", 0, "2024-06-12 11:00:00"),
        (3, 3, None, 4, "Looks good, left a few comments.", 0, "2024-06-12 11:30:00"),
        (4, 3, None, 2, "Updated the screens with the new colour palette.", 0, "2024-06-14 16:00:00"),
        (5, 3, None, 1, "Thanks Ana, reviewing now.", 0, "2024-06-14 16:20:00"),
        (6, 2, None, 2, "Anyone up for lunch at the ramen place?", 0, "2024-06-14 12:00:00"),
        (7, None, 1, 3, "Did you see the release notes?", 0, "2024-06-13 15:00:00"),
        (8, 4, None, 3, "Code freeze starts on the 24th.", 0, "2024-06-13 10:00:00")]),
}


def verify_private_channel(initial_db_path, final_db_path, final_answer=None):
    import sqlite3
    conn = sqlite3.connect(final_db_path)
    row = conn.execute("SELECT id, topic, is_private FROM channels WHERE name = 'launch-war-room'").fetchone()
    if row is None:
        return {"result": "others"}
    members = sorted(r[0] for r in conn.execute("SELECT user_id FROM channel_members WHERE channel_id = ?", (row[0],)))
    ok = row[1] == "Coordination for the v2 launch" and row[2] == 1 and members == [1, 5]
    return {"result": "complete" if ok else "others"}


def verify_post(initial_db_path, final_db_path, final_answer=None):
    import sqlite3
    new = sqlite3.connect(final_db_path).execute(
        "SELECT channel_id, sender_id, body FROM messages WHERE id > 8").fetchall()
    return {"result": "complete" if new == [(1, 1, "Standup moved to 10:30 today")] else "others"}


def verify_pin(initial_db_path, final_db_path, final_answer=None):
    import sqlite3
    pinned = sorted(r[0] for r in sqlite3.connect(final_db_path).execute("SELECT id FROM messages WHERE pinned = 1"))
    return {"result": "complete" if pinned == [1, 4] else "others"}


def verify_direct_message(initial_db_path, final_db_path, final_answer=None):
    import sqlite3
    new = sqlite3.connect(final_db_path).execute(
        "SELECT channel_id, recipient_id, sender_id, body FROM messages WHERE id > 8").fetchall()
    ok = new == [(None, 3, 1, "Can you review my PR before Friday?")]
    return {"result": "complete" if ok else "others"}


def verify_topic(initial_db_path, final_db_path, final_answer=None):
    import sqlite3
    topics = dict(sqlite3.connect(final_db_path).execute("SELECT name, topic FROM channels").fetchall())
    expected = dict(sqlite3.connect(initial_db_path).execute("SELECT name, topic FROM channels").fetchall())
    expected["random"] = "Pets, plants and weekend plans"
    return {"result": "complete" if topics == expected else "others"}


def verify_topic_question(initial_db_path, final_db_path, final_answer=None):
    import sqlite3
    unchanged = list(sqlite3.connect(initial_db_path).iterdump()) == list(sqlite3.connect(final_db_path).iterdump())
    ok = unchanged and "design reviews and critiques" in (final_answer or "").lower()
    return {"result": "complete" if ok else "others"}


TASKS = [
    {"task": "Create a private channel called 'launch-war-room' with the topic 'Coordination for the v2 launch' "
             "and add Raj Patel to it.",
     "verify": verify_private_channel,
     "gold": [("create_channel", {"name": "launch-war-room", "topic": "Coordination for the v2 launch",
                                  "is_private": True}),
              ("search_users", {"query": "Raj"}), ("add_channel_member", {"channel_id": 5, "user_id": 5})],
     "answer": "Created the private channel #launch-war-room and added Raj Patel.",
     "wrong": [("create_channel", {"name": "launch-war-room", "topic": "Coordination for the v2 launch",
                                   "is_private": False}),
               ("add_channel_member", {"channel_id": 5, "user_id": 5})]},
    {"task": "Post 'Standup moved to 10:30 today' in the #general channel.",
     "verify": verify_post,
     "gold": [("get_channel_by_name", {"name": "general"}), ("post_message", {"channel_id": 1, "body": "Standup moved to 10:30 today"})],
     "answer": "Posted the message in #general.",
     "wrong": [("post_message", {"channel_id": 2, "body": "Standup moved to 10:30 today"})]},
    {"task": "Pin the most recent message that Ana Souza posted in #design.",
     "verify": verify_pin,
     "gold": [("get_channel_by_name", {"name": "design"}), ("list_channel_messages", {"channel_id": 3, "limit": 10}),
              ("pin_message", {"message_id": 4})],
     "answer": "Pinned Ana's message about the new colour palette.",
     "wrong": [("pin_message", {"message_id": 2})]},
    {"task": "Send Tom Becker a direct message saying 'Can you review my PR before Friday?'",
     "verify": verify_direct_message,
     "gold": [("search_users", {"query": "Tom"}),
              ("send_direct_message", {"recipient_id": 3, "body": "Can you review my PR before Friday?"})],
     "answer": "Sent the direct message to Tom Becker.",
     "wrong": [("send_direct_message", {"recipient_id": 4, "body": "Can you review my PR before Friday?"})]},
    {"task": "Change the topic of #random to 'Pets, plants and weekend plans'.",
     "verify": verify_topic,
     "gold": [("get_channel_by_name", {"name": "random"}),
              ("set_channel_topic", {"channel_id": 2, "topic": "Pets, plants and weekend plans"})],
     "answer": "The #random topic is now 'Pets, plants and weekend plans'.",
     "wrong": [("set_channel_topic", {"channel_id": 2, "topic": "Pets and plants"})]},
    {"task": "What is the topic of the #design channel?",
     "verify": verify_topic_question,
     "gold": [("get_channel_by_name", {"name": "design"})],
     "answer": "The topic of #design is 'Design reviews and critiques'.",
     "wrong": [("set_channel_topic", {"channel_id": 3, "topic": "Design reviews and critiques!"})]},
]
