-- Agent sessions (SPEC §14, §16): the records of orchestrator-agents' PgSessionRepository,
-- on the same database as the plans. Runs with search_path set to the store's schema.
-- A session's turn lock is no row: it is a session-level advisory lock of the connection
-- running the turn, so it goes away with that connection (or its process).

CREATE TABLE sessions (
    id             text PRIMARY KEY,             -- a checked session id (check_session_id)
    record         json NOT NULL,                -- a SessionRecord, as JSON
    created_at     bigint NOT NULL,              -- the record's own createdAt, in ms: `list` order
    created_time   timestamptz NOT NULL DEFAULT now(),
    updated_time   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX sessions_oldest_first ON sessions (created_at, id);
