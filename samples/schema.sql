-- Quickstart sample, part 1: the schema.
-- Runs BEFORE the replication slot is created, so none of this is decoded (wal2json never prints DDL).
-- samples/regenerate.py then creates the slot and runs samples/workload.sql.

CREATE TABLE public.customers (
    id          bigint PRIMARY KEY,
    name        text NOT NULL,
    email       text,
    balance     numeric(12,2) NOT NULL DEFAULT 0,
    score       double precision,
    tags        text[],
    profile     jsonb,
    avatar      bytea,
    notes       text,
    created_at  timestamptz NOT NULL DEFAULT now()
);

-- EXTERNAL = out-of-line TOAST storage without compression: a 10 kB notes value is moved to the TOAST
-- table, so an UPDATE that does not touch it leaves it out of the WAL (and out of wal2json's output).
ALTER TABLE public.customers ALTER COLUMN notes SET STORAGE EXTERNAL;

-- Composite primary key; ON UPDATE CASCADE turns a customer id change into order key changes.
CREATE TABLE public.orders (
    customer_id bigint NOT NULL REFERENCES public.customers (id) ON UPDATE CASCADE,
    order_no    integer NOT NULL,
    amount      numeric NOT NULL,
    status      text NOT NULL DEFAULT 'new',
    PRIMARY KEY (customer_id, order_no)
);

-- Truncated at the end of the workload (format 2 prints a T record, format 1 an empty transaction).
CREATE TABLE public.audit_log (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    event       text NOT NULL,
    payload     jsonb,
    logged_at   timestamptz NOT NULL
);
