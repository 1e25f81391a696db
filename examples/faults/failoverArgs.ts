/**
 * The command line of the failover fault's service (both editions' examples/faults/failoverApp.ts): Effect-free,
 * read once as it starts. Bad options exit 2.
 */
import { parseArgs } from "node:util"

export const { values } = parseArgs({
  options: {
    nodes: { type: "string" },
    breaker: { type: "string" },
    stream: { type: "string" },
    lease: { type: "string", default: "3000" },
    "rate-on-error": { type: "string", default: "deny" },
    consume: { type: "boolean", default: false },
    id: { type: "string", default: String(process.pid) },
    "wait-replicas": { type: "string" }
  }
})
const rateOnError = values["rate-on-error"]
if (
  values.nodes === undefined || values.breaker === undefined || values.stream === undefined ||
  (rateOnError !== "allow" && rateOnError !== "deny")
) {
  console.error("usage: failoverApp.ts --nodes <port,…> --breaker <name> --stream <name> [options]")
  process.exit(2)
}
export const onError: "allow" | "deny" = rateOnError
export const nodes = values.nodes.split(",").map((port) => ({ host: "127.0.0.1", port: Number(port) }))
export const breakerName = values.breaker
const waitMillis = values["wait-replicas"] === undefined ? undefined : Number(values["wait-replicas"])
export const waitReplicas = waitMillis === undefined ? undefined : { replicas: 1, timeout: waitMillis }
