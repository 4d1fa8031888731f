-- +goose Up
-- One record per (uid, generation, state) of a pipeline, named uniquely in its
-- namespace. The body is the pipeline's JSON, kept as bytes: the store never looks
-- inside, and bytea takes it as it is (no parse, no rejection of \u0000).
CREATE TABLE pipeline_records (
    id         bigserial PRIMARY KEY,
    uid        text        NOT NULL,
    generation bigint      NOT NULL,
    state      text        NOT NULL,
    namespace  text        NOT NULL,
    name       text        NOT NULL,
    pipeline   text        NOT NULL,
    phase      text        NOT NULL DEFAULT '',
    trigger    text        NOT NULL DEFAULT '',
    object     text        NOT NULL DEFAULT '',
    creator    text        NOT NULL DEFAULT '',
    labels     jsonb       NOT NULL DEFAULT '{}',
    created    timestamptz NOT NULL,
    finished   timestamptz NOT NULL,
    archived   timestamptz NOT NULL DEFAULT now(),
    body       bytea       NOT NULL,
    CONSTRAINT pipeline_records_once UNIQUE (uid, generation, state),
    CONSTRAINT pipeline_records_name UNIQUE (namespace, name)
);
-- Pages of one namespace: WHERE namespace = $1 AND id > $2 ORDER BY id.
CREATE INDEX pipeline_records_namespace_id ON pipeline_records (namespace, id);
-- Label selectors: @> (=, in) and ? (exists).
CREATE INDEX pipeline_records_labels ON pipeline_records USING gin (labels);
-- Retention of the archive: DELETE ... WHERE archived < $1.
CREATE INDEX pipeline_records_archived ON pipeline_records (archived);

CREATE TABLE pipeline_events (
    id           bigserial PRIMARY KEY,
    pipeline_uid text        NOT NULL,
    type         text        NOT NULL DEFAULT '',
    reason       text        NOT NULL DEFAULT '',
    message      text        NOT NULL DEFAULT '',
    time         timestamptz NOT NULL,
    count        integer     NOT NULL DEFAULT 0
);
CREATE INDEX pipeline_events_pipeline_id ON pipeline_events (pipeline_uid, id);

-- +goose Down
DROP TABLE pipeline_events;
DROP TABLE pipeline_records;
