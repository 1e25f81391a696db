/**
 * One cell of the sweep (a policy at an offered load) run to its end, and the figures taken from it (figures.ts).
 */
import { Effect, Random } from "effect"
import { type Cell, cellSeed, emptyStats, figures, type Policy } from "../../../../examples/storm/figures.js"
import { capacityOf, type Scenario } from "../../../../examples/storm/model.js"
import { Simulator } from "./engine.js"
import { program } from "./policies.js"

export { type Cell, cellSeed, type Row } from "../../../../examples/storm/figures.js"

/** Runs `policy` at `load` × capacity. */
export const runCell = (scenario: Scenario, policy: Policy, load: number, seed: number): Cell => {
  const offered = load * capacityOf(scenario)
  const sim = new Simulator()
  const stats = emptyStats(scenario)
  sim.run(
    program(sim, scenario, policy, offered, stats).pipe(Effect.withRandom(Random.make(cellSeed(seed, policy, load)))),
    scenario.durationMs
  )
  return figures(scenario, policy, offered, stats)
}
