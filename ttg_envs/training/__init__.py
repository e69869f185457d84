"""Training-side code: DeltaTTG credit assignment (``credit``)."""
