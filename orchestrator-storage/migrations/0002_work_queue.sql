-- The work queue of remote execution (SPEC §16): the attempts of jobs ready to run, which
-- workers claim with leases. Runs with search_path set to the store's schema.

CREATE TABLE work_items (
    id             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    plan_id        text NOT NULL REFERENCES plans (plan_id) ON DELETE CASCADE,
    node_id        text NOT NULL,
    attempt        bigint NOT NULL,
    payload        json NOT NULL,                -- what a worker needs to run the attempt
    -- queued -> claimed -> done -> collected, or claimed -> expired (its worker went silent)
    state          text NOT NULL DEFAULT 'queued',
    worker         text,                         -- who claimed it last
    generation     bigint NOT NULL DEFAULT 0,    -- + 1 at each claim: the fencing token
    lease_expires  timestamptz,                  -- by the database's clock, never a worker's
    result         json,
    enqueued_time  timestamptz NOT NULL DEFAULT now(),
    claimed_time   timestamptz,
    finished_time  timestamptz,
    UNIQUE (plan_id, node_id, attempt)
);
CREATE INDEX work_items_queued ON work_items (id) WHERE state = 'queued';
CREATE INDEX work_items_claimed ON work_items (plan_id, lease_expires) WHERE state = 'claimed';
CREATE INDEX work_items_done ON work_items (plan_id, id) WHERE state = 'done';
