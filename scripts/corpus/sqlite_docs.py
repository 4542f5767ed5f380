#!/usr/bin/python3
"""A document store on SQLite, for the trace corpus (scripts/record-corpus).

    sqlite_docs.py DB ROWS SECONDS

Loads ROWS documents (an integer id, a user, a time, a body of 300-1500
random bytes) into DB with an index by (user, time), then for SECONDS runs
one client: a user drawn from a Zipf law (exponent 0.9 over 50,000 users,
ranks scattered over the user ids) and, per operation, 70 % "that user's
latest 20 documents" (an index range scan and 20 table lookups), 20 % a
point read of a random document of a random user's, 10 % a new document
(its own transaction, WAL, synchronous=NORMAL).  Deterministic (seed 1).
"""
import random
import sqlite3
import sys
import time

db, rows, seconds = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
USERS = 50000
rng = random.Random(1)
con = sqlite3.connect(db, isolation_level=None)
con.execute("PRAGMA page_size=4096")
con.execute("PRAGMA journal_mode=WAL")
con.execute("PRAGMA synchronous=NORMAL")
con.execute("CREATE TABLE docs(id INTEGER PRIMARY KEY, user INTEGER, ts INTEGER, body BLOB)")

# Load in time order, users uniform: each user's documents spread over the file.
t0 = time.time()
batch = 20000
for start in range(0, rows, batch):
    con.execute("BEGIN")
    con.executemany("INSERT INTO docs VALUES (?,?,?,?)",
                    ((i, rng.randrange(USERS), i, rng.randbytes(rng.randint(300, 1500)))
                     for i in range(start, min(rows, start + batch))))
    con.execute("COMMIT")
con.execute("CREATE INDEX docs_user_ts ON docs(user, ts)")
con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
print(f"loaded {rows} documents in {time.time() - t0:.0f} s", flush=True)

# Zipf over ranks 1..USERS (inverse CDF of a continuous power law), ranks
# scattered over user ids so that hot users are not neighbours.
a = 0.9
def zipf_user():
    u = rng.random()
    r = ((USERS ** (1 - a) - 1) * u + 1) ** (1 / (1 - a))
    return (int(r) * 7919) % USERS

ops = {"latest": 0, "point": 0, "insert": 0}
next_id, next_ts = rows, rows
end = time.time() + seconds
while time.time() < end:
    x = rng.random()
    user = zipf_user()
    if x < 0.7:
        con.execute("SELECT id, length(body) FROM docs WHERE user=? ORDER BY ts DESC LIMIT 20",
                    (user,)).fetchall()
        ops["latest"] += 1
    elif x < 0.9:
        row = con.execute("SELECT id FROM docs WHERE user=? ORDER BY ts LIMIT 1 OFFSET ?",
                          (user, rng.randrange(20))).fetchone()
        if row:
            con.execute("SELECT body FROM docs WHERE id=?", row).fetchone()
        ops["point"] += 1
    else:
        con.execute("INSERT INTO docs VALUES (?,?,?,?)",
                    (next_id, user, next_ts, rng.randbytes(rng.randint(300, 1500))))
        next_id += 1
        next_ts += 1
        ops["insert"] += 1
con.close()
print("operations: " + ", ".join(f"{k} {v}" for k, v in ops.items()), flush=True)
