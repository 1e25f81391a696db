/**
 * The command line of the consumer faults' worker process (both editions' examples/faults/consumerWorker.ts) and
 * the body of its messages: Effect-free, read once as the worker starts. A bad option exits 2.
 */
export interface WorkBody {
  readonly n: number
  readonly poison?: "fatal" | "fail" | "exit"
}

const argv = process.argv.slice(2)
const arg = (name: string, fallback?: string): string => {
  const i = argv.indexOf(`--${name}`)
  const value = i === -1 ? fallback : argv[i + 1]
  if (value === undefined) {
    console.error(`consumerWorker: --${name} is required`)
    process.exit(2)
  }
  return value
}
const int = (name: string, fallback: number): number => {
  const value = Number(arg(name, String(fallback)))
  if (!Number.isInteger(value) || value < 0) {
    console.error(`consumerWorker: --${name} takes a whole number`)
    process.exit(2)
  }
  return value
}

const source = arg("source")
if (source !== "pg" && source !== "redis") {
  console.error("consumerWorker: --source is pg or redis")
  process.exit(2)
}
export const sourceKind: "pg" | "redis" = source
export const queue = arg("queue")
export const effects = arg("effects")
export const processed = arg("processed")
export const name = arg("name")
export const concurrency = int("concurrency", 4)
export const visibilityMs = int("visibility-ms", 3000)
export const maxReceives = int("max-receives", 10)
export const handleMs = int("handle-ms", 0)
export const ackDelayMs = int("ack-delay-ms", 0)
