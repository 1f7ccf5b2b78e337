//! The JSON Schema of a plan (the input of `create_copilot_plan`), written to teach a model the
//! plan format. The plan parser stays the authority: it also takes the snake_case aliases.

use serde_json::{json, Value};

fn work_spec(what: &str) -> Value {
    json!({
        "description": format!(
            "{what}. A string: `@agent <instructions>` runs an AI agent, any other string is a \
             shell command. Or an object with `type`: \
             {{\"type\":\"shell\",\"command\":\"npm test\",\"shell\"?:\"sh|bash|pwsh|powershell|cmd\",\
             \"env\"?,\"cwd\"? (inside the worktree),\"timeout\"? (ms)}}; \
             {{\"type\":\"process\",\"executable\":\"cargo\",\"args\"?:[\"test\"],\"env\"?,\"cwd\"?,\"timeout\"?}} \
             (no shell); {{\"type\":\"agent\",\"instructions\":\"...\" or \"instructionsFile\":\"path\",\
             \"agent\"?:\"copilot|claude|codex|gemini\",\"model\"?,\"modelTier\"?:\"fast|standard|premium\",\
             \"effort\"?:\"low|medium|high|xhigh\",\"maxTurns\"?,\"resumeSession\"?,\"allowedFolders\"?,\
             \"allowedUrls\"?,\"env\"?,\"timeout\"?}}. Any object may add \
             \"onFailure\":{{\"noAutoHeal\"?,\"message\"?,\"resumeFromPhase\"?}}."
        ),
        "anyOf": [
            {"type": "string", "minLength": 1},
            {"type": "object", "required": ["type"], "properties": {
                "type": {"type": "string", "enum": ["shell", "process", "agent"]}
            }}
        ]
    })
}

fn env() -> Value {
    json!({
        "type": "object",
        "additionalProperties": {"type": "string"},
        "description": "Environment variables (name -> value)."
    })
}

/// The schema of one job.
pub fn job_schema() -> Value {
    json!({
        "type": "object",
        "required": ["producerId", "task", "work", "dependencies"],
        "properties": {
            "producerId": {
                "type": "string", "pattern": "^[a-z0-9-]{3,64}$",
                "description": "Stable id of the job, unique in the plan: 3-64 of a-z, 0-9 and `-`. \
                                Other jobs name it in `dependencies`; tools accept it as `producerId`."
            },
            "task": {"type": "string", "description": "Short description; the commit message is `[Plan] <task>`."},
            "work": work_spec("What the job does in its own git worktree; its changes are committed"),
            "dependencies": {
                "type": "array", "items": {"type": "string"},
                "description": "producerIds this job builds on (their commits are merged into its worktree \
                                first). `[]` for a root job. No cycles."
            },
            "name": {"type": "string", "description": "Display name."},
            "prechecks": work_spec("Runs before the work; failing stops the job"),
            "postchecks": work_spec("Validation after the commit (e.g. tests)"),
            "instructions": {"type": "string", "description": "Extra instructions for agent work."},
            "baseBranch": {"type": "string", "description": "Branch a root job starts from (default: the plan's)."},
            "expectsNoChanges": {"type": "boolean", "description": "The job may commit nothing (checks, analysis). Default false: no changes fails the job."},
            "autoHeal": {"type": "boolean", "description": "Let an agent fix a failed shell/process phase (default true)."},
            "approval": {"type": "string", "enum": ["before"], "description": "\"before\": the job waits for approve_copilot_job (or reject_copilot_job) before it starts."},
            "group": {"type": "string", "description": "Visual grouping path like `backend/api`; no effect on order."},
            "env": env()
        }
    })
}

/// The plan schema (the input of `create_copilot_plan`).
pub fn plan_schema() -> schemars::Schema {
    to_schema(plan_value())
}

/// The input of `scaffold_copilot_plan`: a plan whose jobs are optional (added later).
pub fn scaffold_schema() -> schemars::Schema {
    let mut plan = plan_value();
    plan["required"] = json!(["name"]);
    plan["description"] = json!(
        "A plan to assemble step by step: the same fields as create_copilot_plan, with `jobs` \
         optional (0 to 500). Add jobs with add_copilot_plan_job(s), then finalize_copilot_plan \
         validates the whole plan and starts it."
    );
    plan["properties"]["jobs"]["minItems"] = json!(0);
    to_schema(plan)
}

/// The input of `add_copilot_plan_job`: `planId` plus one job's fields.
pub fn add_job_schema() -> schemars::Schema {
    let mut job = job_schema();
    job["properties"]["planId"] = json!({
        "type": "string",
        "description": "The scaffolded (or running) plan to add the job to."
    });
    job["required"] = json!(["planId", "producerId", "task", "work", "dependencies"]);
    job["description"] = json!(
        "One job, with the fields of a job in create_copilot_plan, plus planId. Its \
         dependencies name jobs already in the plan."
    );
    to_schema(job)
}

/// Nested groups (the reference's documented form, SPEC §2): each a name, jobs and subgroups.
fn groups_schema(job: Value) -> Value {
    json!({
        "type": "array",
        "description": "Nested groups of jobs, to any depth: `[{\"name\",\"jobs\"?,\"groups\"?}]`. \
                        producerIds need only be unique within their group; a job's qualified \
                        producerId is its group path plus its own (`phase1/collection/count-files`), \
                        which every tool and the graph use. A dependency without `/` names a job of \
                        the same group; one with `/` is looked up from the job's group outward, then \
                        from the root (`collection/count-files` from `phase1/analysis` is \
                        `phase1/collection/count-files`). Groups never order anything.",
        "items": {
            "type": "object",
            "required": ["name"],
            "properties": {
                "name": {"type": "string", "pattern": "^[a-z0-9-]{3,64}$",
                         "description": "The group's name: one segment of its jobs' qualified producerIds."},
                "jobs": {"type": "array", "items": job, "description": "The group's jobs."},
                "groups": {"type": "array", "items": {"type": "object"},
                           "description": "Subgroups, of the same shape as this group."}
            }
        }
    })
}

fn to_schema(value: Value) -> schemars::Schema {
    schemars::Schema::try_from(value).unwrap_or_default()
}

fn plan_value() -> Value {
    let job = job_schema();
    json!({
        "type": "object",
        "description": "A plan: a DAG of jobs. Each job runs in its own git worktree, commits its work, \
                        and the leaves are merged into the target branch at the end (after `verifyRi`). \
                        The plan starts at once (unless `startPaused`) and keeps running in the server; \
                        poll `get_copilot_plan_status` with the returned planId. Unknown fields are errors. \
                        snake_case spellings (`producer_id`, `max_parallel` ...) are accepted too.",
        "required": ["name", "jobs"],
        "properties": {
            "name": {"type": "string", "minLength": 1, "maxLength": 200, "description": "Plan name."},
            "jobs": {"type": "array", "minItems": 0, "maxItems": 500, "items": job.clone(),
                     "description": "The jobs (1 to 500 per call, counting those in `groups`; \
                                     may be empty when `groups` holds them)."},
            "groups": groups_schema(job),
            "baseBranch": {"type": "string", "description": "Branch to start from (default: the current branch, else main)."},
            "targetBranch": {"type": "string", "description": "Branch receiving the result (default: the current branch unless it is the default branch, else `orchestrator/<name>`)."},
            "maxParallel": {"type": "integer", "minimum": 0, "description": "Jobs of this plan running at once; 0 = no plan limit."},
            "cleanUpSuccessfulWork": {"type": "boolean", "description": "Remove worktrees of succeeded jobs once consumed (default true)."},
            "additionalSymlinkDirs": {"type": "array", "items": {"type": "string"}, "description": "Folders symlinked from the repository into each worktree (e.g. node_modules)."},
            "startPaused": {"type": "boolean", "description": "Create the plan paused; start it with resume_copilot_plan."},
            "verifyRi": work_spec("Validation run on the final merged snapshot before it lands on the target branch"),
            "env": env(),
            "resumeAfterPlan": {"type": "string", "description": "planId of a plan that must succeed before this one starts."},
            "budget": {"type": "object", "description": "Usage limits: {\"costUsd\": X, \"tokens\": N}. The plan pauses when a finished job reaches one.", "properties": {"costUsd": {"type": "number"}, "tokens": {"type": "integer"}}},
            "worktreeInit": {"type": "array", "items": work_spec("Setup run in every new worktree (e.g. `npm ci`)"), "description": "Setup commands for every new worktree."},
            "isolation": {"type": "string", "enum": ["worktree", "none"], "description": "`worktree` (default) or `none`: jobs run in the repository folder itself with no git phases."}
        }
    })
}
