"""The protocol: its rules in one registry (`rules`, over the pure rules of `scheduling`), the
explanation agents read, generated from a condition (`explain`), a run's context (`context`:
state, guarded agent calls, the clock), the phases a round runs (`phases`), the mechanisms that
decide a schedule (`mechanisms`) and the arena that loops over subruns and rounds (`arena`).
Nothing here imports agents or anything above them: the run builder (`mbb.batch.build`) gives
the arena its agents.
"""
