/** The demo's command line: every option known, every value checked, nothing ignored. */

export interface DemoArgs {
  readonly seed: number
  readonly orders: number
  readonly clients: number
  readonly quick: boolean
  readonly json: boolean
}

export const defaultSeed = 42

export const usage = [
  "usage: npm run demo -- [--seed <integer>] [--orders <n>] [--clients <n>] [--quick] [--json]",
  "",
  `  --seed <integer>  the fault pattern (default ${defaultSeed}); the same seed meets the same faults`,
  "  --orders <n>      logical orders to place, 1 to 10000 (default 200, 60 with --quick)",
  "  --clients <n>     concurrent clients, 1 to 1000 (default 20, 10 with --quick)",
  "  --quick           a smaller run",
  "  --json            print one JSON line with both summaries instead of the table",
  "  --help            print this and exit"
].join("\n")

export type Parsed =
  | { readonly _tag: "Run"; readonly args: DemoArgs }
  | { readonly _tag: "Help" }
  | { readonly _tag: "Invalid"; readonly message: string }

const flags = new Set(["--quick", "--json"])
const valued = new Set(["--seed", "--orders", "--clients"])

export const parseArgs = (argv: ReadonlyArray<string>): Parsed => {
  const values = new Map<string, string>()
  const seen = new Set<string>()
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!
    if (arg === "--help" || arg === "-h") return { _tag: "Help" }
    if (seen.has(arg)) return { _tag: "Invalid", message: `${arg} given twice` }
    seen.add(arg)
    if (flags.has(arg)) continue
    if (!valued.has(arg)) {
      return { _tag: "Invalid", message: arg.startsWith("-") ? `unknown option ${arg}` : `unexpected argument ${arg}` }
    }
    const value = argv[i + 1]
    if (value === undefined || value.startsWith("--")) return { _tag: "Invalid", message: `${arg} needs a value` }
    values.set(arg, value)
    i++
  }
  const integer = (name: string, fallback: number, min: number, max: number): number | string => {
    const text = values.get(`--${name}`)
    if (text === undefined) return fallback
    const value = /^-?\d{1,15}$/.test(text) ? Number(text) : NaN
    return Number.isSafeInteger(value) && value >= min && value <= max
      ? value
      : `--${name} needs an integer from ${min} to ${max}, got ${JSON.stringify(text)}`
  }
  const quick = seen.has("--quick")
  const seed = integer("seed", defaultSeed, Number.MIN_SAFE_INTEGER, Number.MAX_SAFE_INTEGER)
  const orders = integer("orders", quick ? 60 : 200, 1, 10_000)
  const clients = integer("clients", quick ? 10 : 20, 1, 1_000)
  for (const value of [seed, orders, clients]) {
    if (typeof value === "string") return { _tag: "Invalid", message: value }
  }
  return {
    _tag: "Run",
    args: {
      seed: seed as number,
      orders: orders as number,
      clients: clients as number,
      quick,
      json: seen.has("--json")
    }
  }
}
