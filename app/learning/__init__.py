"""A learner's progress, the instructor's dashboard and its CSV export."""
