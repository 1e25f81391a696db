import { Effect, Exit, Fiber, Scope } from "effect"
const ops = 50_000, rounds = 15
const ok = Effect.succeed(1)
import { Context } from "effect"
const T = Context.Service("x")
const H = { onSuccess: Effect.succeed, onFailure: Effect.failCause }
const H2 = { onSuccess: (a) => { Context.getOrElse(Fiber.getCurrent().context, T, () => undefined); return Effect.succeed(a) }, onFailure: Effect.failCause }
const cases = {
  base: () => ok,
  withFiber: () => Effect.withFiber(() => ok),
  catch: () => Effect.catch(ok, () => ok),
  catchCause: () => Effect.catchCause(ok, () => ok),
  matchEffect: () => Effect.matchEffect(ok, { onSuccess: Effect.succeed, onFailure: Effect.fail }),
  onExit: () => Effect.onExit(ok, () => Effect.void),
  flatMap: () => Effect.flatMap(ok, Effect.succeed),
  andThen: () => Effect.andThen(Effect.void, ok),
  uninterruptibleMask: () => Effect.uninterruptibleMask((r) => r(ok)),
  uninterruptible: () => Effect.uninterruptible(ok),
  runForkWith: () => Effect.withFiber((f) => { const c = Effect.runForkWith(f.context)(ok); return c.pollUnsafe() }),
  sync: () => Effect.sync(() => 1),
  suspend: () => Effect.suspend(() => ok),
  matchCauseEffect: () => Effect.matchCauseEffect(ok, H),
  matchCauseEffectClosure: () => Effect.matchCauseEffect(ok, { onSuccess: Effect.succeed, onFailure: (c) => Effect.failCause(c) }),
  getCurrentCtx: () => Effect.matchCauseEffect(ok, H2),
}
const loop = (make, n) => Effect.gen(function*() { for (let i = 0; i < n; i++) yield* Effect.exit(make()) })
const samples = Object.fromEntries(Object.keys(cases).map((n) => [n, []]))
for (const make of Object.values(cases)) await Effect.runPromise(loop(make, 2000))
for (let r = 0; r < rounds; r++) for (const [name, make] of Object.entries(cases)) {
  const s = process.hrtime.bigint(); await Effect.runPromise(loop(make, ops)); samples[name].push(Number(process.hrtime.bigint() - s) / ops)
}
const median = (xs) => Math.min(...xs)
for (const [n, xs] of Object.entries(samples)) console.log(n.padEnd(30), median(xs).toFixed(0))
