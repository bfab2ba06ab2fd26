"""Shapley values from coalition values: which coalitions, and the estimators.

``coalitions`` enumerates or samples coalitions; ``exact`` maps the values of all
``2^p`` coalitions to Shapley values; ``stratified`` samples coalitions in
complementary pairs, stratified by size, and ``sampled`` estimates the values (with
standard errors) from them. Every estimator splits over batches of coalitions
(``partial`` per batch, ``finish`` on the ordered list), which is the executor seam.
"""
