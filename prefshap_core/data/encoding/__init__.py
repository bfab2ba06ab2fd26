"""From a table of covariates (items or contexts) to model space.

Policy, documented for users in sample_data/README.md:

- A column is **numeric** when at least 80% of its non-missing values are numbers
  (``TRUE``/``FALSE`` count as 1/0); any other cell in it is then an error naming
  file, row and column. Otherwise it is **categorical**: one 0/1 column per category,
  named ``"<column>=<category>"``, the columns forming one feature group (one
  Shapley player). ``numeric=`` / ``categorical=`` override the guess;
  ``multi_categorical={"Type": ["Type 1", "Type 2"]}`` makes one multi-hot group
  over the union of several columns' categories.
- Missing values are imputed (numeric: median; categorical: most frequent category)
  and every imputation is reported as an :class:`ImputationNote`; a column with no
  value at all is an error.
- A column with at least ``missing_indicator_share`` (default 20%) of its cells
  missing gets a 0/1 *missing indicator* column ``"<column> (missing)"`` in its own
  group instead, so that unknown rows are not made identical to the typical one:
  its missing cells then read as the mean of the present values (numeric; 0 in model
  space) or as no category (categorical), with the indicator at 1. Both rules need
  nothing but the feature space, so a model file's reader encodes an empty cell the
  same way (docs/model-format.md).
- Columns are standardised once, on this table: offset = mean, scale = standard
  deviation (1 for constant columns).

Each job lives in its own module, and is imported from there:

* ``spec``: what an encoding is (``GroupEncoding``, ``EncodingSpec``, ``EncodedTable``);
* ``tables``: ``encode_table`` (fit on a table), ``encode_rows`` (new rows), ``row_labels``;
* ``fitting``: fitting one group (column kind, categories, fills) and standardising;
* ``missing``: fills, missing indicators and the imputation notes;
* ``numeric_cells``: reading numbers from cells, and the errors for bad ones;
* ``overrides``: checking the ``numeric=`` / ``categorical=`` / ``multi_categorical=``
  declarations.
"""
