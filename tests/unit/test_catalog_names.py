"""The rule that names the lake's tables in a catalog (``resolver.lake.catalog``): plain names as they are,
any other part lower-cased with a hash of its own, so that no two source tables share a name."""

from __future__ import annotations

import pytest

from resolver.catalog_target import Catalog
from resolver.errors import ConfigError
from resolver.lake.catalog import catalog_name, lake_tables
from resolver.lake.folders import Lake


def test_plain_names_are_kept_and_others_get_a_hash_of_their_own() -> None:
    assert catalog_name("public.orders") == "public__orders"
    assert catalog_name("public.orders", history=True) == "public__orders__history"
    assert catalog_name('public."Mixed Case"').startswith("public__mixed_case_")
    # the separator '__' appears nowhere else: these would both be a__b__c without the hash
    names = {catalog_name('"a__b".c'), catalog_name('a."b__c"'), catalog_name("a.b_c"), catalog_name('"A".b')}
    assert len(names) == 4 and catalog_name("a.b_c") == "a__b_c"
    assert catalog_name('public."orders__history"') != catalog_name("public.orders", history=True)
    assert catalog_name("public.orders", override="orders") == "orders"


def test_two_tables_under_one_name_and_a_bad_catalog_fail_in_one_line(tmp_path: object) -> None:
    lake = Lake.at(str(tmp_path))
    with pytest.raises(ConfigError, match="would name both"):
        lake_tables(lake, ["public.a", "public.b"], {"public.a": "same", "public.b": "same"})
    assert Catalog.parse("spark_catalog.cdc") == Catalog("cdc", "spark_catalog")
    assert Catalog.parse("cdc").qualified("public__orders") == "`cdc`.`public__orders`"
    with pytest.raises(ConfigError, match="expected <catalog>.<schema> or <schema>"):
        Catalog.parse("a.b.c")
