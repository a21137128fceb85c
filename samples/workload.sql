-- Quickstart sample, part 2: the decoded workload (runs after samples/schema.sql and after the slot exists).
-- Executed statement by statement like psql: each statement outside BEGIN ... COMMIT is its own transaction.
-- All timestamps are explicit so the table contents (samples/expected/) are the same on every run;
-- xid, lsn and the commit "timestamp" in the captures change whenever the samples are regenerated.

-- T1: a single-row insert with every column type of customers.
INSERT INTO public.customers (id, name, email, balance, score, tags, profile, avatar, created_at)
VALUES (1, 'Alice Martin', 'alice@example.com', 1250.75, 4.5, '{vip,"early adopter"}',
        '{"tier": "gold", "langs": ["en", "fr"], "credit": 1.50}', '\x89504e470d0a1a0a',
        '2024-01-15 09:30:00+00');

-- T2: a multi-row insert: unicode, escaping, empty string vs NULL, empty array and empty bytea.
INSERT INTO public.customers (id, name, email, balance, score, tags, profile, avatar, notes, created_at)
VALUES (2, 'Bob Stone', 'bob@example.com', 80.00, 0.1, '{}', '{"tier": "silver"}', NULL, NULL,
        '2024-02-29 13:14:15.123456+00'),
       (3, 'Zoë Ünïcødé 日本語 🚀', 'zoe@example.com', 0, NULL, '{"naïve","a,b","say \"hi\"",NULL}',
        '{"name": "Zoë", "emoji": "🚀"}', '\x00ff10', E'line 1\nline 2\t"quoted" \\ backslash',
        '2024-03-01 00:30:00+01'),
       (4, 'Empty Strings', '', 0, 0, '{""}', '{}', '\x', '', '2024-03-02 12:00:00+00'),
       (5, 'Null Values', NULL, 0, NULL, NULL, NULL, NULL, NULL, '2024-03-02 12:00:00+00');

-- T3: special float values: NaN here, Infinity and -Infinity in later updates (wal2json prints null).
INSERT INTO public.customers (id, name, email, score, created_at)
VALUES (6, 'Special Floats', 'nan@example.com', 'NaN', '2024-03-03 08:15:00+00');

-- T4: a multi-statement transaction over three tables.
BEGIN;
INSERT INTO public.orders (customer_id, order_no, amount, status)
VALUES (1, 1, 19.99, 'new'), (1, 2, 5.00, 'new'), (2, 1, 250.00, 'new');
UPDATE public.customers SET balance = balance - 24.99 WHERE id = 1;
INSERT INTO public.audit_log (event, payload, logged_at)
VALUES ('orders.created', '{"orders": 3, "customers": [1, 2]}', '2024-03-05 10:00:00+00');
COMMIT;

-- T5: a 60-digit numeric (30 digits before and 30 after the point; too wide for Spark's DecimalType(38)).
INSERT INTO public.orders (customer_id, order_no, amount, status)
VALUES (3, 1, 123456789012345678901234567890.123456789012345678901234567890, 'quote');

-- T6, T7: plain updates (key unchanged).
UPDATE public.orders SET status = 'shipped' WHERE customer_id = 1 AND order_no = 1;
UPDATE public.customers SET score = 'Infinity' WHERE id = 6;

-- T8: a primary-key change: customer 2 becomes 20; the cascade moves order (2,1) to (20,1) in the same
-- transaction. Both updates carry the OLD key in "identity" / "oldkeys".
UPDATE public.customers SET id = 20 WHERE id = 2;

-- T9: a rolled-back savepoint inside a committed transaction: only the first update is decoded.
BEGIN;
UPDATE public.orders SET status = 'paid' WHERE customer_id = 20 AND order_no = 1;
SAVEPOINT before_discount;
UPDATE public.orders SET amount = 0 WHERE customer_id = 20;
ROLLBACK TO SAVEPOINT before_discount;
COMMIT;

-- (no output) a rolled-back transaction.
BEGIN;
DELETE FROM public.orders;
ROLLBACK;

-- T10, T11: deletes (default replica identity: only the key columns are sent).
DELETE FROM public.orders WHERE customer_id = 1 AND order_no = 2;
DELETE FROM public.customers WHERE id = 5;

-- T12: a DDL-only transaction: decoded as an empty transaction (B + C, or {"change":[]}).
BEGIN;
CREATE INDEX orders_status_idx ON public.orders (status);
COMMENT ON TABLE public.orders IS 'orders of the quickstart sample';
COMMIT;

-- T13: a large value (10 000 bytes, stored out of line because of SET STORAGE EXTERNAL) ...
INSERT INTO public.customers (id, name, email, balance, notes, created_at)
VALUES (7, 'Large Notes', 'big@example.com', 10.00, repeat('x', 10000), '2024-03-10 08:00:00+00');

-- T14: ... and an update that does not touch it: "notes" is MISSING from this update's columns
-- (unchanged TOAST value); the resolver must keep the stored value, not set it to NULL.
UPDATE public.customers SET balance = 42.00, score = '-Infinity' WHERE id = 7;

-- T15: a transactional logical message (format 2: B, M, C; format 1: a "message" change).
SELECT pg_logical_emit_message(true, 'app', 'hello');

-- T16: TRUNCATE of the third table (format 2: a T record; format 1: an empty transaction).
TRUNCATE public.audit_log;
