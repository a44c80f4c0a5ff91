"""The state of each source, kept in its staging store: the ledger (``ledger``: its intervals,
checkpoint, loads and last check, as ``records``) and the lease that lets one step at a time
change it (``lease``). Takes what each step did; gives where the next one starts, what waits,
what failed. Every other stage reads it; it reads the staging store and the source's history
marks only.
"""
