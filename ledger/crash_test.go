package ledger

const crashChildEnv = "LEDGER_CRASH_CHILD"

func crashChild() {}
