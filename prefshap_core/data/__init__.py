"""Duel data: reading tables, encoding covariates, building and splitting DuelData."""

from prefshap_core.data.build import DUEL_COLUMNS, build_duel_data, load_directory
from prefshap_core.data.csv_io import MISSING_TOKENS, read_table, reading_row_names, row_numbers
from prefshap_core.data.duel_data import DataReport, DuelData, ImputationNote, Split, split_duels
from prefshap_core.data.encoding.spec import EncodedTable, EncodingSpec, GroupEncoding
from prefshap_core.data.encoding.tables import encode_rows, encode_table, row_labels
from prefshap_core.data.feature_space import FeatureSpace
from prefshap_core.data.id_columns import IgnoredColumn
from prefshap_core.data.layouts import ColumnMapping, build_from_tables, is_wide_table, load_files
from prefshap_core.data.readers import UPLOAD_TYPES, read_any

__all__ = [
    "DUEL_COLUMNS",
    "MISSING_TOKENS",
    "UPLOAD_TYPES",
    "ColumnMapping",
    "DataReport",
    "DuelData",
    "EncodedTable",
    "EncodingSpec",
    "FeatureSpace",
    "GroupEncoding",
    "IgnoredColumn",
    "ImputationNote",
    "Split",
    "build_duel_data",
    "build_from_tables",
    "encode_rows",
    "encode_table",
    "is_wide_table",
    "load_directory",
    "load_files",
    "read_any",
    "read_table",
    "reading_row_names",
    "row_labels",
    "row_numbers",
    "split_duels",
]
