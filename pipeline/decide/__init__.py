"""The select stage: constraints, the Pareto front, the objective, and the deploy folder."""
