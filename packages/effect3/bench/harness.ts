/**
 * A tiny benchmark harness: each case is an effect factory run `ops` times in one fiber, timed over
 * several rounds; the median round gives ns/op. One process, one run, so ratios are comparable.
 */
import { Effect } from "effect"

export interface Case {
  readonly name: string
  /** Builds the effect measured for operation `i`. */
  readonly make: (i: number) => Effect.Effect<unknown, unknown>
  readonly ops?: number
}

export interface Result {
  readonly name: string
  readonly nsPerOp: number
}

const loop = (c: Case, ops: number) =>
  Effect.gen(function*() {
    for (let i = 0; i < ops; i++) yield* Effect.exit(c.make(i))
  })

export const measure = async (c: Case, rounds = 7): Promise<Result> => {
  const ops = c.ops ?? 20_000
  await Effect.runPromise(loop(c, Math.min(ops, 2_000))) // warm-up
  const samples: Array<number> = []
  for (let r = 0; r < rounds; r++) {
    const start = process.hrtime.bigint()
    await Effect.runPromise(loop(c, ops))
    samples.push(Number(process.hrtime.bigint() - start) / ops)
  }
  samples.sort((a, b) => a - b)
  return { name: c.name, nsPerOp: samples[Math.floor(samples.length / 2)]! }
}

export const fmt = (n: number): string => n >= 10_000 ? `${(n / 1000).toFixed(1)} µs` : `${n.toFixed(0)} ns`
