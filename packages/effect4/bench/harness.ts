/**
 * The Effect 4 side of the harness (the figures, ratios and output are the root's `bench/report.ts`, shared with the
 * Effect 3 LTS bench): each case is an effect factory run `ops` times in one fiber, timed over several rounds; the
 * median round gives ns/op. One process, one run, so ratios are comparable.
 */
import { Effect } from "effect"
import { median } from "../../../bench/report.js"

export interface Case {
  readonly name: string
  /** Builds the effect measured for operation `i`. */
  readonly make: (i: number) => Effect.Effect<unknown, unknown>
  readonly ops?: number
}

const loop = (c: Case, ops: number) =>
  Effect.gen(function*() {
    for (let i = 0; i < ops; i++) yield* Effect.exit(c.make(i))
  })

/** One round of `ops` operations of the case: ns per operation. */
export const round = async (c: Case, ops = c.ops ?? 20_000): Promise<number> => {
  const start = process.hrtime.bigint()
  await Effect.runPromise(loop(c, ops))
  return Number(process.hrtime.bigint() - start) / ops
}

/** ns/op of each case: a warm-up, then `rounds` rounds of every case by turns, the median of each. */
export const measure = async (cases: ReadonlyArray<Case>, rounds = 7): Promise<Record<string, number>> => {
  for (const c of cases) await Effect.runPromise(loop(c, Math.min(c.ops ?? 20_000, 2_000)))
  const samples = cases.map(() => [] as Array<number>)
  for (let r = 0; r < rounds; r++) {
    for (const [i, c] of cases.entries()) samples[i]!.push(await round(c))
  }
  return Object.fromEntries(cases.map((c, i) => [c.name, median(samples[i]!)]))
}

/** `op`'s operations per second as one Effect program with `concurrency` fibers, each running it back to back. */
export const inEffect = (
  concurrency: number,
  millis: number,
  op: (i: number) => Effect.Effect<unknown, unknown>
): Promise<number> =>
  Effect.runPromise(Effect.gen(function*() {
    let done = 0
    const start = process.hrtime.bigint()
    const end = start + BigInt(millis) * 1_000_000n
    yield* Effect.forEach(
      Array.from({ length: concurrency }, (_, w) => w),
      (w) =>
        Effect.gen(function*() {
          for (let i = w; process.hrtime.bigint() < end; i += concurrency) {
            yield* Effect.exit(op(i))
            done++
          }
        }),
      { concurrency: "unbounded", discard: true }
    )
    return done / (Number(process.hrtime.bigint() - start) / 1e9)
  }))
