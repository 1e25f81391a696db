/**
 * `npm run bench` (here, or at the root): builds the library (`dist/`) and runs this folder with plain `node` (Node
 * strips the types), against the built entry points — `effect-resilience/*` resolves to `dist/` through the
 * package's own `exports`: what users run. Every case of the Effect 3 LTS bench, on Effect 4, each ratio against its
 * baseline and target from this one run:
 *
 *   npm run bench -- [--only core,redis] [--json] [--check] [--rounds 3] [--stores sqlite,postgres] [--before <dist>]
 *
 * `--before <dist>` gives the telemetry suite a build of an older commit to measure its pipeline against
 * (`bash bench/before.sh [commit]` makes one and prints its path).
 *
 * `--json` prints one JSON document (every case: name, ops/s, baseline, ratio, target, pass) and nothing else;
 * `--check` exits non-zero when a target is missed (benchmarks are not tests: CI does not run them). The figures,
 * ratios and output are the root's `bench/` (Effect-free, shared with the Effect 3 bench); the scale table is
 * `npm run bench:scale` (the root's `bench/scale.ts`).
 */
import { flags, run } from "../../../bench/report.js"
import * as breaker from "./breaker.js"
import * as bulkhead from "./bulkhead.js"
import * as core from "./core.js"
import * as idempotency from "./idempotency.js"
import * as limiter from "./limiter.js"
import * as pipeline from "./pipeline.js"
import * as queue from "./queue.js"
import * as redis from "./redis.js"
import * as sql from "./sqlStore.js"
import * as telemetry from "./telemetry.js"

await run({
  edition: "effect4",
  flags: flags(),
  floor: core.suite,
  suites: [
    core.suite,
    bulkhead.suite,
    breaker.suite,
    limiter.suite,
    pipeline.suite,
    telemetry.suite,
    redis.suite,
    sql.suite,
    idempotency.suite,
    queue.suite
  ]
})
// the benches hold scopes, pools and connections open to the end: what was measured is printed
process.exit()
