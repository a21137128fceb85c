"""A type matrix: tables whose columns hold every kind of PostgreSQL type a capture meets, with the values
that print differently depending on how they are printed (issue 67): ``character(n)`` padding, ``inet``
hosts and networks, domains over ``boolean``, ``inet``, ``character(n)``, numbers and arrays (nested too),
enums, arrays of each holding NULLs, quotes and braces, ranges and multiranges, composite types, and the
extension types ``hstore``, ``ltree``, ``citext`` and ``isn``. Each table is a ``tests.difftest.Table``
(a ``rid`` per row), so its state is read and compared as the differential test's are.

``ROWS`` inserts the rows a copy or a stream carries; ``WORKLOAD`` then changes them as an application
would (updates that leave a TOASTed value out, key changes, deletes, inserts)."""

from __future__ import annotations

from tests.difftest import Table

PREAMBLE = """
CREATE EXTENSION hstore;
CREATE EXTENSION ltree;
CREATE EXTENSION citext;
CREATE EXTENSION isn;
CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy', 'it''s "odd", {really}');
CREATE TYPE pair AS (a integer, b text);
CREATE TYPE nest AS (p pair, tags text[], at timestamptz);
CREATE TYPE floatrange AS RANGE (subtype = float8);
CREATE DOMAIN flag AS boolean;
CREATE DOMAIN flag2 AS flag;
CREATE DOMAIN amount3 AS numeric(5,3);
CREATE DOMAIN counter AS bigint CHECK (VALUE >= 0);
CREATE DOMAIN ratio AS double precision;
CREATE DOMAIN host AS inet;
CREATE DOMAIN code4 AS character(4);
CREATE DOMAIN code4b AS code4;
CREATE DOMAIN labels AS text[];
CREATE DOMAIN blob AS bytea;
CREATE DOMAIN moody AS mood;
CREATE DOMAIN day AS date;
"""

SCALARS = Table(
    "scalars",
    (
        ("id", "integer"),
        ("rid", "integer"),
        ("i2", "smallint"),
        ("i8", "bigint"),
        ("o", "oid"),
        ("f4", "real"),
        ("f8", "double precision"),
        ("n", "numeric"),
        ("n3", "numeric(10,3)"),
        ("b", "boolean"),
        ("raw", "bytea"),
        ("t", "text"),
        ("vc", "character varying(6)"),
        ("ch", "character(5)"),
        ("ch1", '"char"'),
        ("nm", "name"),
        ("d", "date"),
        ("tm", "time without time zone"),
        ("tmz", "time(3) with time zone"),
        ("ts", "timestamp(3) without time zone"),
        ("tsz", "timestamp with time zone"),
        ("iv", "interval"),
        ("m", "money"),
        ("u", "uuid"),
        ("js", "json"),
        ("jb", "jsonb"),
        ("x", "xml"),
        ("ip", "inet"),
        ("net", "cidr"),
        ("mac", "macaddr"),
        ("mac8", "macaddr8"),
        ("bt", "bit(4)"),
        ("vb", "bit varying"),
        ("tv", "tsvector"),
        ("tq", "tsquery"),
        ("pt", "point"),
        ("ln", "line"),
        ("sg", "lseg"),
        ("bx", "box"),
        ("pth", "path"),
        ("pg", "polygon"),
        ("cr", "circle"),
        ("lsn", "pg_lsn"),
    ),
    primary_key=("id",),
)

CONTAINERS = Table(
    "containers",
    (
        ("id", "integer"),
        ("rid", "integer"),
        ("ints", "integer[]"),
        ("grid", "integer[]"),
        ("texts", "text[]"),
        ("chars", "character(3)[]"),
        ("ips", "inet[]"),
        ("flags", "boolean[]"),
        ("blobs", "bytea[]"),
        ("nums", "numeric[]"),
        ("docs", "jsonb[]"),
        ("moods", "mood[]"),
        ("pairs", "pair[]"),
        ("r4", "int4range"),
        ("r8", "int8range"),
        ("rn", "numrange"),
        ("rts", "tsrange"),
        ("rtz", "tstzrange"),
        ("rd", "daterange"),
        ("rf", "floatrange"),
        ("m4", "int4multirange"),
        ("mn", "nummultirange"),
        ("md", "datemultirange"),
        ("p", "pair"),
        ("nt", "nest"),
    ),
    primary_key=("id",),
)

DOMAINS = Table(
    "domains",
    (
        ("id", "integer"),
        ("rid", "integer"),
        ("fl", "flag"),
        ("fl2", "flag2"),
        ("amt", "amount3"),
        ("cnt", "counter"),
        ("rat", "ratio"),
        ("h", "host"),
        ("c4", "code4"),
        ("c4b", "code4b"),
        ("lb", "labels"),
        ("bl", "blob"),
        ("mo", "moody"),
        ("dy", "day"),
        ("fls", "flag[]"),
        ("hs", "host[]"),
        ("c4s", "code4[]"),
        ("e", "mood"),
        ("kv", "hstore"),
        ("tree", "ltree"),
        ("ci", "citext"),
        ("isbn13", "isbn13"),
        ("ean", "ean13"),
        ("iss", "issn"),
    ),
    primary_key=("id",),
)

#: keys whose text is what their type prints: padded ``character(n)``, an ``inet`` host and a domain over
#: ``character(n)``; a TOASTed body that updates leave out
KEYED = Table(
    "keyed",
    (
        ("code", "character(4)"),
        ("addr", "inet"),
        ("tag", "code4"),
        ("rid", "integer"),
        ("ok", "flag"),
        ("body", "text"),
    ),
    primary_key=("code", "addr", "tag"),
    toast=("body",),
)

TABLES = (SCALARS, CONTAINERS, DOMAINS, KEYED)
SCHEMA_SQL = PREAMBLE + "\n".join(t.ddl() for t in TABLES)

_SCALAR_ROWS = [
    r"""(1, 1, -32768, 9223372036854775807, 4294967295, 1.5, 1e300, 12345678901234567890.000000001, 3.540,
    true, '\x00ff10', 'plain', 'ab', 'ab', 'x', 'nm', '2024-02-29', '13:14:15', '13:14:15.123+02',
    '2024-02-29 13:14:15.123', '2024-02-29 13:14:15.5+02', '1 year 2 mons 3 days 04:05:06.5', 12.34,
    'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '{"a": [1, 2.50, "x"]}', '{"b": 1.50, "a": null}',
    '<a x="1">t</a>', '192.168.0.1', '10.0.0.0/8', '08:00:2b:01:02:03', '08:00:2b:01:02:03:04:05',
    B'1010', B'101', 'a fat cat', 'fat & rat', '(1.5,2)', '{1,-1,0}', '[(0,0),(1,1)]', '((0,0),(1,1))',
    '[(0,0),(1,1),(2,0)]', '((0,0),(1,1),(2,0))', '<(0,0),1.5>', '16/B374D848')""",
    r"""(2, 2, 7, -1, 0, 'NaN', '-Infinity', 'NaN', -0.001, false, '\x', '', '', '', ' ', '', '0001-01-01',
    '00:00:00', '00:00:00+00', '1999-12-31 23:59:59.999', '1970-01-01 00:00:00+00', '-1 days +00:00:01',
    -0.5, '00000000-0000-0000-0000-000000000000', '[]', '[]', '', '::1', '::/0', '00:00:00:00:00:00',
    '00:00:00:00:00:00:00:00', B'0000', B'', '', 'a', '(0,0)', '{0,1,0}', '[(0,0),(0,0)]', '((0,0),(0,0))',
    '((0,0))', '((0,0))', '<(0,0),0>', '0/0')""",
    r"""(3, 3, 0, 0, 1, '-0', 5e-324, 'Infinity', 0, NULL, '\x5c6e', 'it''s "q" \ back', 'ü ☃',
    'ü  ', '''', 'with space', '2000-01-01', '23:59:59.999999', '23:59:59.999-11:30',
    '2000-01-01 00:00:00', '2000-01-01 00:00:00.000001+00', '00:00:00', 0,
    'ffffffff-ffff-ffff-ffff-ffffffffffff', 'null', 'null', '<r/>', '2001:db8::1/64', '2001:db8::/32',
    'ff:ff:ff:ff:ff:ff', 'ff:ff:ff:ff:ff:ff:ff:ff', B'1111', B'1', 'x:1A y:2B', '!a', '(-1,-1)', '{1,1,1}',
    '[(1,2),(3,4)]', '((3,4),(1,2))', '[(1,2),(3,4)]', '((1,2),(3,4),(5,6))', '<(1,2),3>',
    'FFFFFFFF/FFFFFFFF')""",
    "(4, 4" + ", NULL" * (len(SCALARS.columns) - 2) + ")",
]
_CONTAINER_ROWS = [
    r"""(1, 1, '{1,NULL,3}', '{{1,2},{3,4}}', '{"a b","c,d","e\"f","g\\h",NULL,"NULL","{x}",""}',
    '{ab,"a  ",NULL}', '{192.168.0.1,10.0.0.0/8,NULL}', '{t,f,NULL}', '{"\\x00ff",NULL}',
    '{1.50,NaN,NULL}', ARRAY['{"x": 1}'::jsonb, NULL], '{sad,"it''s \"odd\", {really}",NULL}',
    ARRAY[ROW(1, 'a b')::pair, NULL, ROW(NULL, NULL)::pair], '[1,10)', '[-9223372036854775808,0)',
    '(1.5,2.50]', '[2024-01-01 00:00,2024-01-02 00:00)', '[2024-01-01 00:00+02,infinity)', '[2024-01-01,)',
    '[1.5,2.5]', '{[1,3),[5,7)}', '{(1.5,2.5]}', '{[2024-01-01,2024-01-03)}', ROW(7, 'it''s, "x"'),
    ROW(ROW(1, '{q}'), '{a,"b c"}', '2024-02-29 13:14:15+01'))""",
    """(2, 2, '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}', 'empty', 'empty', 'empty',
    'empty', 'empty', 'empty', 'empty', '{}', '{}', '{}', ROW(NULL, NULL), ROW(NULL, NULL, NULL))""",
    "(3, 3" + ", NULL" * (len(CONTAINERS.columns) - 2) + ")",
]
_DOMAIN_ROWS = [
    r"""(1, 1, true, false, 3.540, 3, 1.5, '192.168.0.1', 'ab', 'x', '{a,"b c",NULL}', '\x00ff', 'happy',
    '2024-02-29', '{t,NULL,f}', '{192.168.0.1,10.0.0.0/8}', '{ab,NULL}', 'it''s "odd", {really}',
    'k=>v, "k 2"=>NULL, "q\""=>"\\"', 'Top.Science.Astronomy', 'MiXeD Case', '978-0-393-04002-9',
    '9780393040029', '1436-4522')""",
    r"""(2, 2, false, true, -0.001, 0, 'NaN', '10.1.0.0/16', 'abcd', '', '{}', '\x', 'sad', '1970-01-01',
    '{}', '{}', '{}', 'sad', '', 'Top', '', '978-1-56619-909-4', '0000000000000', '0317-8471')""",
    "(3, 3" + ", NULL" * (len(DOMAINS.columns) - 2) + ")",
]
_KEYED_ROWS = [
    "('ab', '192.168.0.1', 'x', 1, true, repeat('toast-1 ', 2000))",
    "('ab  ', '192.168.0.1/24', 'x ', 2, false, repeat('toast-2 ', 2000))",
    "('', '::1', '', 3, NULL, 'short')",
    "('abcd', '10.0.0.0/8', 'abcd', 4, true, NULL)",
]
#: how many rows ``ROWS`` inserts
ROW_COUNT = len(_SCALAR_ROWS) + len(_CONTAINER_ROWS) + len(_DOMAIN_ROWS) + len(_KEYED_ROWS)
#: every table's rows, one statement each
ROWS = (
    f"INSERT INTO scalars VALUES {', '.join(_SCALAR_ROWS)}",
    f"INSERT INTO containers VALUES {', '.join(_CONTAINER_ROWS)}",
    f"INSERT INTO domains VALUES {', '.join(_DOMAIN_ROWS)}",
    f"INSERT INTO keyed VALUES {', '.join(_KEYED_ROWS)}",
)

#: after the copy: updates (one leaving the TOASTed body out), key changes, deletes and inserts, a
#: transaction each; every table keeps rows that only the copy brings
WORKLOAD = (
    ("UPDATE scalars SET ch = 'z', ip = '10.0.0.1', b = NOT b, n3 = n3 + 1 WHERE id = 1",),
    ("UPDATE scalars SET id = 10 WHERE id = 2",),
    ("""UPDATE containers SET texts = '{"}","{",""}', r4 = '[2,3)' WHERE id = 1""",),
    ("UPDATE containers SET id = 20, ints = '{NULL}' WHERE id = 2",),
    ("UPDATE domains SET fl = NOT fl, h = '192.168.0.2', c4 = 'q' WHERE id = 1",),
    (
        "UPDATE domains SET id = 30 WHERE id = 2",
        "INSERT INTO domains (id, rid, fl, c4) VALUES (4, 4, true, 'x')",
    ),
    ("UPDATE keyed SET ok = false WHERE rid = 1",),  # the TOASTed body left out of the update
    ("UPDATE keyed SET code = 'cd' WHERE rid = 2",),  # a key change leaving the body out
    ("UPDATE keyed SET addr = '192.168.0.9' WHERE rid = 4", "DELETE FROM keyed WHERE rid = 3"),
    ("INSERT INTO keyed VALUES ('n ', '::2', 'n', 5, true, repeat('toast-5 ', 2000))",),
)
