/**
 * `npm run storm`: a retry storm, simulated with the library's own Retry, RetryBudget, AdaptiveThrottle,
 * AdaptiveLimiter and Criticality on a virtual clock. See docs/overload.md, "The retry storm", for the model.
 *
 *   npm run storm -- --loads 0.5..3:0.5 --seed 12 --out storm-out/ --images docs/images/ [--json]
 *                    [--policies throttle,full] [--max-rejection-rate 0.9]
 *
 * Writes <out>/results.csv and <images>/storm-goodput.svg, <images>/storm-timeline.svg, prints the table, the
 * issue's targets with the figure each was judged on, and the wall and CPU time; with --json the last line is
 * `{ "capacity": …, "rows": [...] }`. Cells (policy × load) are spread over worker threads; each is seeded on
 * its own, so the results do not depend on the split.
 */
import { stormCli } from "../../../examples/storm/cli.js"
import { runCell } from "./storm/sweep.js"

stormCli({ runCell, moduleUrl: import.meta.url })
