/**
 * The retry budget of gRPC's retry throttling (gRFC A6), as arithmetic on plain numbers.
 *
 * Tokens are kept in thousandths, as gRPC keeps them, so adding and taking them is exact integer arithmetic
 * (a `tokenRatio` of 0.1 added ten times is exactly one token, with no float drift). A failed attempt takes one
 * token (never below zero), a success gives back `ratio` (never above `max`), and a retry is allowed only while
 * more than half of `max` is left.
 */

/** Thousandths per token. */
export const MILLI = 1000

/** A budget's parameters, in thousandths of a token. */
export interface Params {
  /** The bucket size, and the tokens a new budget starts with. */
  readonly max: number
  /** Given back per success. */
  readonly ratio: number
}

/**
 * A count of tokens in thousandths: the decimals beyond the third are dropped, as gRPC drops them (A6: 0.5466 is
 * 0.546; grpc-java's `(int)(ratio * 1000)`). The cut is made on the number as written — its shortest decimal form,
 * `String(tokens)` — because the binary double may lie just below it: `1.005 * 1000` is `1004.999…`.
 */
export const toThousandths = (tokens: number): number => {
  if (Number.isInteger(tokens) || !Number.isFinite(tokens)) return tokens * MILLI
  const written = String(tokens)
  // a fraction in exponent form is below 1e-6, so under one thousandth (larger doubles are integers)
  if (written.includes("e")) return 0
  const [whole = "0", fraction = ""] = written.split(".")
  return Number(whole + (fraction + "000").slice(0, 3))
}

/** Thousandths back to tokens. */
export const toTokens = (thousandths: number): number => thousandths / MILLI

/** Why `maxTokens`/`tokenRatio` cannot make a budget (naming the option), or `undefined` when they can. */
export const check = (maxTokens: number, tokenRatio: number): string | undefined => {
  for (const [name, value] of [["maxTokens", maxTokens], ["tokenRatio", tokenRatio]] as const) {
    if (!(typeof value === "number" && Number.isFinite(value) && value > 0)) {
      return `${name} must be a finite number > 0, got ${value}`
    }
    if (toThousandths(value) < 1) return `${name} must be >= 0.001, got ${value}`
  }
  return undefined
}

/** The parameters for options that passed {@link check}. */
export const params = (maxTokens: number, tokenRatio: number): Params => ({
  max: toThousandths(maxTokens),
  ratio: toThousandths(tokenRatio)
})

/** The tokens of a new budget: full. */
export const initial = (p: Params): number => p.max

/** Tokens after a success. */
export const afterSuccess = (p: Params, tokens: number): number => Math.min(p.max, tokens + p.ratio)

/** Tokens after a failed attempt. */
export const afterFailure = (tokens: number): number => Math.max(0, tokens - MILLI)

/** Whether a retry may follow, with `tokens` left (after the failure was recorded). */
export const allowsRetry = (p: Params, tokens: number): boolean => 2 * tokens > p.max
