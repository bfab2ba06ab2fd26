"""The product's workflows on top of the engine: train and evaluate, explain, select.

The CLI and the dashboard are both thin clients of these functions, so a number
shown in the browser is the number ``prefshap train`` prints. Each job lives in its
own module, and is imported from there (``from prefshap_core.workflow.training import
train``):

* ``settings``: ``TrainSettings``, what to train;
* ``results``: ``TrainingResult``, what training returns;
* ``training``: ``train`` and evaluation (CV on small data, CME regularisers);
* ``explaining``: ``explain_duels`` and the ``prefshap explain --duels`` table;
* ``selections``: which duels a view shows, and the columns to select on;
* ``items``: one item's record, and finding items by id or name;
* ``fingerprints``: the cache keys of data and settings.
"""
