/**
 * Issue 31 under the TestClock, on the memory source: which deliveries a message is charged with when its
 * consumer's process dies (core/crashAttribution.ts), and how `Consumer.run` runs a suspect alone. A process is
 * simulated by a consumer whose source calls all fail from the moment it "dies": nothing it does afterwards is
 * recorded, as nothing a dead process does is (the real processes are in poisonExit.int.test.ts). Both editions
 * run it (packages/contract); `legacy` simulates the sources before issue 31.
 */
import {
  type DurationInput,
  fork,
  type Forked,
  pollFiber,
  provideScope,
  queueQuietLogger,
  scoped,
  TestClock,
  yieldNow
} from "#edition"
import { describe, expect, it } from "@effect/vitest"
import { Clock, Effect, Exit, Scope } from "effect"
import { Consumer, QueueSource } from "effect-resilience"

interface Body {
  readonly n: number
}

/** Lets forked fibers run until they block. */
const settle = Effect.repeat(yieldNow, { times: 50 })

/** Advances the TestClock in steps until `done` holds. */
const until = (done: Effect.Effect<boolean>, step: DurationInput = "10 millis", max = 10_000) =>
  Effect.gen(function*() {
    for (let i = 0; i < max; i++) {
      yield* settle
      if (yield* done) return
      yield* TestClock.adjust(step)
    }
    throw new Error("condition never held")
  })

interface Process {
  readonly source: QueueSource.QueueSource<Body>
  readonly kill: () => void
  readonly dead: () => boolean
  /** Handlers running in this process now. */
  running: number
}

/**
 * A process over `base`: once killed, every call of its source fails, as a dead process records nothing. With
 * `legacy`, its source is what every source was before issue 31: every claim charged, no suspects, no `markAlone`.
 */
const processOn = (base: QueueSource.QueueSource<Body>, acked: Set<string>, legacy: boolean): Process => {
  let dead = false
  const guard = <X>(operation: string, effect: Effect.Effect<X, QueueSource.QueueError>) =>
    Effect.suspend(() =>
      dead
        ? Effect.fail(new QueueSource.QueueError({ queue: base.name, operation, cause: "the process died" }))
        : effect
    )
  const source: QueueSource.QueueSource<Body> = {
    name: base.name,
    visibilityTimeout: base.visibilityTimeout,
    send: base.send,
    receive: (max, options) =>
      guard(
        "receive",
        legacy
          ? Effect.map(base.receive(max), (ms) => ms.map(({ suspect: _, ...m }) => m))
          : base.receive(max, options)
      ),
    ack: (m) => guard("ack", Effect.map(base.ack(m), (ok) => (ok && acked.add(m.id), ok))),
    ackMany: (ms) =>
      guard("ack", Effect.map(base.ackMany!(ms), (oks) => (ms.forEach((m, i) => oks[i] && acked.add(m.id)), oks))),
    extend: (m) => guard("extend", base.extend!(m)),
    ...(legacy ? {} : { markAlone: (m: QueueSource.Message<Body>) => guard("markAlone", base.markAlone!(m)) }),
    release: (m, options) => guard("release", base.release(m, options)),
    deadLetter: (m, reason) => guard("deadLetter", base.deadLetter(m, reason)),
    deadLetters: base.deadLetters
  }
  return { source, kill: () => void (dead = true), dead: () => dead, running: 0 }
}

interface Start {
  readonly id: string
  readonly receiveCount: number
  readonly suspect: boolean
  /** Other handlers running in its process as it started. */
  readonly beside: number
  readonly at: number
}

interface Simulation {
  readonly visibility: number
  readonly crashes: number
  readonly deadLetters: ReadonlyArray<readonly [string, number]>
  readonly acked: number
  readonly starts: ReadonlyArray<Start>
  /** When each healthy message was first handled, in milliseconds from the start. */
  readonly handledAt: ReadonlyMap<string, number>
}

/**
 * 40 messages, the first of which ends its process as its handler starts (`process.exit(1)`), consumed by one
 * process at a time (concurrency 2, `maxReceiveCount` 3) that a supervisor starts again at once whenever it dies.
 */
const simulate = (legacy: boolean): Effect.Effect<Simulation> =>
  Effect.gen(function*() {
    const visibility = 1_000
    const base = yield* QueueSource.memory<Body>({ visibilityTimeout: visibility })
    yield* Effect.orDie(base.send(Array.from({ length: 40 }, (_, n) => ({ id: `m${n}`, body: { n } }))))
    const t0 = yield* Clock.currentTimeMillis
    const acked = new Set<string>()
    const handledAt = new Map<string, number>()
    const starts: Array<Start> = []
    let crashes = 0
    const zombies: Array<Forked<void>> = []
    for (let round = 0; round < 20; round++) {
      const proc = processOn(base, acked, legacy)
      const scope = yield* Scope.make()
      yield* provideScope(scope)(
        Consumer.run({
          source: proc.source,
          handler: (m) =>
            Effect.gen(function*() {
              // a dead process runs nothing more
              if (proc.dead()) return yield* Effect.interrupt
              starts.push({
                id: m.id,
                receiveCount: m.receiveCount,
                suspect: m.suspect === true,
                beside: proc.running,
                at: (yield* Clock.currentTimeMillis) - t0
              })
              // the poison: `process.exit(1)`
              if (m.body.n === 0) {
                proc.kill()
                return yield* Effect.interrupt
              }
              proc.running++
              yield* Effect.sleep("20 millis").pipe(Effect.ensuring(Effect.sync(() => proc.running--)))
              if (proc.dead()) return yield* Effect.interrupt
              if (!handledAt.has(m.id)) handledAt.set(m.id, (yield* Clock.currentTimeMillis) - t0)
            }),
          concurrency: 2,
          maxReceiveCount: 3
        })
      )
      const finished = Effect.map(Effect.orDie(base.deadLetters.list()), (dead) => acked.size + dead.length === 40)
      yield* until(Effect.zipWith(finished, Effect.sync(() => proc.dead()), (a, b) => a || b))
      // the dead process's fibers can record nothing: closing its scope stands for their end
      zombies.push(yield* fork(Scope.close(scope, Exit.void)))
      if (!proc.dead()) break
      crashes++
    }
    yield* until(Effect.sync(() => zombies.every((z) => pollFiber(z) !== undefined)))
    const dead = yield* Effect.orDie(base.deadLetters.list())
    return {
      visibility,
      crashes,
      deadLetters: dead.map((d) => [d.id, d.receiveCount] as const),
      acked: acked.size,
      starts,
      handledAt
    }
  }).pipe(Effect.provide(queueQuietLogger))

describe("Consumer.run: a message that kills its process (issue 31)", () => {
  it.effect("before: when every lost delivery is charged, the messages claimed beside the poison die with it", () =>
    Effect.gen(function*() {
      const run = yield* simulate(true)
      // the poison and the three messages claimed with it, each time: "received 4 times", never failed
      expect([...run.deadLetters].sort()).toEqual([["m0", 4], ["m1", 4], ["m2", 4], ["m3", 4]])
      expect(run.crashes).toBe(3)
      expect(run.acked).toBe(36)
    }))

  it.effect(
    "40 messages, the first ends its process, concurrency 2, maxReceiveCount 3, restarted at once: the poison " +
      "is dead-lettered after 3 crashes alone; no healthy message is charged or dead-lettered",
    () =>
      Effect.gen(function*() {
        const { acked, crashes, deadLetters, handledAt, starts, visibility } = yield* simulate(false)
        expect(deadLetters).toEqual([["m0", 4]])
        expect(acked).toBe(39)
        expect(crashes).toBe(4)
        const poison = starts.filter((s) => s.id === "m0")
        // its first crash beside another handler is not its own; the next three, alone, are
        expect(poison.map((s) => [s.receiveCount, s.suspect])).toEqual([[1, false], [1, true], [2, true], [3, true]])
        // every suspect started with no other handler beside it
        for (const s of starts.filter((s) => s.suspect)) expect([s.id, s.beside]).toEqual([s.id, 0])
        // no crash was charged to a healthy message
        expect(Math.max(...starts.filter((s) => s.id !== "m0").map((s) => s.receiveCount))).toBe(1)
        // the delay others see: the messages held at the first crash wait one visibility timeout, and one more when
        // they wait beside the poison's first run alone (all of them suspects with one receive: the poison may come
        // first); nothing else is held then, and every other message is handled at once by the next process
        const delays = [...handledAt.entries()].filter(([, at]) => at > 500)
        expect(delays.map(([id]) => id).sort()).toEqual(["m1", "m2", "m3"])
        for (const [, at] of delays) expect(at).toBeLessThan(2 * visibility + 500)
      })
  )

  scoped(
    "a suspect runs alone after the handlers running have ended; nothing is claimed until it is settled",
    () =>
      Effect.gen(function*() {
        const source = yield* QueueSource.memory<Body>({ visibilityTimeout: "10 seconds" })
        yield* source.send([{ id: "s", body: { n: 0 } }])
        // a consumer claimed it and died: it comes back a suspect
        yield* source.receive(1, { runsSuspectsAlone: true })
        yield* TestClock.adjust("10 seconds")
        yield* source.send(Array.from({ length: 6 }, (_, i) => ({ id: `h${i}`, body: { n: i + 1 } })))
        const log: Array<string> = []
        let running = 0
        const consumer = yield* Consumer.run({
          source,
          handler: (m) =>
            Effect.gen(function*() {
              log.push(`start ${m.id} beside ${running}`)
              running++
              yield* Effect.sleep(m.id === "s" ? "1 second" : "300 millis")
              running--
              log.push(`end ${m.id}`)
            }),
          concurrency: 3,
          bufferSize: 4,
          maxReceiveCount: 3
        })
        // claimed with the suspect, last in its batch: the six run first, three at a time
        yield* until(Effect.map(consumer.stats, (s) => s.received === 7))
        // sent while the suspect is held: claimed only once it is settled
        yield* source.send([{ id: "later", body: { n: 7 } }])
        yield* until(Effect.map(consumer.stats, (s) => s.processed === 8))
        expect(yield* consumer.stats).toMatchObject({ processed: 8, ranAlone: 1, deadLettered: 0, abandoned: 0 })
        const started = log.indexOf("start s beside 0")
        expect(started).toBe(12)
        // every handler started before it had ended, and nothing starts or runs beside it
        expect(log.slice(0, started).filter((l) => l.startsWith("end")).length).toBe(6)
        expect(log.slice(started)).toEqual(["start s beside 0", "end s", "start later beside 0", "end later"])
      })
  )

  it.effect("the memory source: a plain receive charges every lost delivery; markAlone is fenced and charged", () =>
    Effect.gen(function*() {
      const source = yield* QueueSource.memory<Body>({ visibilityTimeout: "1 second" })
      yield* source.send([{ id: "plain", body: { n: 1 } }])
      // a loop of your own: every lost delivery counts, as it always did
      yield* source.receive(1)
      yield* TestClock.adjust("1 second")
      const [plain] = yield* source.receive(1)
      expect([plain!.receiveCount, plain!.suspect]).toEqual([2, true])
      yield* source.ack(plain!)

      yield* source.send([{ id: "a", body: { n: 2 } }])
      const [first] = yield* source.receive(1, { runsSuspectsAlone: true })
      expect([first!.receiveCount, first!.suspect]).toEqual([1, false])
      yield* TestClock.adjust("1 second")
      // lost while merely claimed: given back
      const [second] = yield* source.receive(1, { runsSuspectsAlone: true })
      expect([second!.receiveCount, second!.suspect]).toEqual([1, true])
      expect(yield* source.markAlone!(first!)).toBe(false) // stale
      expect(yield* source.markAlone!(second!)).toBe(true)
      // the mark extends the delivery, as `extend` does
      yield* TestClock.adjust("999 millis")
      expect(yield* source.receive(1, { runsSuspectsAlone: true })).toEqual([])
      yield* TestClock.adjust("1 second")
      // lost while running alone: charged
      const [third] = yield* source.receive(1, { runsSuspectsAlone: true })
      expect([third!.receiveCount, third!.suspect]).toEqual([2, true])
      // given back unprocessed: the receive undone, still a suspect; then a verdict clears it
      yield* source.release(third!, { undoReceive: true })
      const [fourth] = yield* source.receive(1, { runsSuspectsAlone: true })
      expect([fourth!.receiveCount, fourth!.suspect]).toEqual([2, true])
      yield* source.release(fourth!, { error: "boom" })
      const [fifth] = yield* source.receive(1, { runsSuspectsAlone: true })
      expect([fifth!.receiveCount, fifth!.suspect, fifth!.lastError]).toEqual([3, false, "boom"])
    }))
})
