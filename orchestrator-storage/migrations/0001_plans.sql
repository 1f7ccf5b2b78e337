-- Plans, their journals, leases, attempt specs and phase logs (orchestrator-storage `pg`).
-- Runs with search_path set to the store's schema, inside the migration transaction.

-- One row per plan: its state as of the last compaction (at first the creation record) and
-- the summary `list` reads without replaying anything.
CREATE TABLE plans (
    plan_id        text PRIMARY KEY,
    -- Creation order; also tells a re-created plan from an older one with the same id.
    incarnation    bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
    created_at     bigint NOT NULL,              -- the plan's own createdAt, in ms
    summary        json NOT NULL,                -- a PlanSummary, kept current by every append
    status         text NOT NULL,                -- the summary's status, for SQL queries
    state          json NOT NULL,                -- a PlanRecord, as of batch state_batch
    state_version  integer NOT NULL,             -- its SCHEMA_VERSION
    state_batch    bigint NOT NULL DEFAULT 0,
    state_bytes    bigint NOT NULL,
    last_batch     bigint NOT NULL DEFAULT 0,    -- the newest journal batch
    journal_bytes  bigint NOT NULL DEFAULT 0,    -- bytes of the batches after state_batch
    created_time   timestamptz NOT NULL DEFAULT now(),
    updated_time   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX plans_newest_first ON plans (created_at DESC, incarnation DESC);

-- The journal: one row per appended batch of StateChanges, numbered from 1 without gaps.
CREATE TABLE plan_batches (
    plan_id        text NOT NULL REFERENCES plans (plan_id) ON DELETE CASCADE,
    batch          bigint NOT NULL,
    schema_version integer NOT NULL,
    changes        json NOT NULL,                -- a JSON array of StateChange
    bytes          bigint NOT NULL,
    appended_time  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (plan_id, batch)
);

-- Who runs a plan. Released leases keep their row (expired), so generations only grow.
CREATE TABLE plan_leases (
    plan_id        text PRIMARY KEY REFERENCES plans (plan_id) ON DELETE CASCADE,
    owner          text NOT NULL,                -- host:pid:uuid
    generation     bigint NOT NULL,
    acquired_time  timestamptz NOT NULL,
    expires_time   timestamptz NOT NULL
);

CREATE TABLE attempt_specs (
    plan_id        text NOT NULL REFERENCES plans (plan_id) ON DELETE CASCADE,
    node_id        text NOT NULL,
    attempt        bigint NOT NULL,
    specs          json NOT NULL,                -- an AttemptSpecs
    PRIMARY KEY (plan_id, node_id, attempt)
);

-- Phase logs, append-only: one row per append_log call.
CREATE TABLE phase_logs (
    id             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    plan_id        text NOT NULL REFERENCES plans (plan_id) ON DELETE CASCADE,
    node_id        text NOT NULL,
    attempt        bigint NOT NULL,
    phase          text NOT NULL,                -- kebab-case, as Phase serializes
    chunk          bytea NOT NULL                -- UTF-8 text (bytea: text may hold NUL)
);
CREATE INDEX phase_logs_by_node ON phase_logs (plan_id, node_id, attempt, phase, id);
