/**
 * Small helpers for HTTP Structured Field values (RFC 9651, formerly RFC 8941): sf-strings and the
 * `Idempotency-Key` request header. They are total: malformed input gives `Option.none()`, never an exception.
 *
 * @since 0.1.0
 */
import type { Option } from "effect"
import * as internal from "./internal/http/structuredFields.js"

/**
 * Parses a field value that is exactly one sf-string (`"abc"`, with `\"` and `\\` escapes), ignoring
 * surrounding spaces. Parameters, bare tokens and anything else give `none`.
 *
 * @example
 * ```ts
 * import { StructuredFields } from "effect-resilience"
 *
 * StructuredFields.parseSfString("\"a \\\"quoted\\\" word\"") // Option.some("a \"quoted\" word")
 * ```
 *
 * @since 0.1.0
 * @category parsing
 */
export const parseSfString: (value: string) => Option.Option<string> = internal.parseSfString

/**
 * Serialises a string as an sf-string, escaping `"` and `\`. Only printable ASCII (0x20–0x7E) can be
 * carried; any other character gives `none`.
 *
 * @example
 * ```ts
 * import { StructuredFields } from "effect-resilience"
 *
 * StructuredFields.formatSfString("daily") // Option.some("\"daily\"")
 * ```
 *
 * @since 0.1.0
 * @category formatting
 */
export const formatSfString: (value: string) => Option.Option<string> = internal.formatSfString

/**
 * Options of {@link parseIdempotencyKey}.
 *
 * @since 0.1.0
 * @category models
 */
export interface IdempotencyKeyOptions {
  /** Longest accepted key, in characters after unescaping. Default 255. */
  readonly maxLength?: number | undefined
}

/**
 * Reads an `Idempotency-Key` header value. Two forms are accepted, after trimming spaces and tabs:
 *
 * - an sf-string, as the IETF draft specifies: `"8e03978e-40d5-43e8-bc93-6894a57f9324"`;
 * - a bare token, as most clients send it: RFC 9110 token characters plus `:` and `/` (the extra
 *   characters of an sf-token). Unlike an sf-token it may start with a digit, so a bare UUID is accepted.
 *
 * The key must be non-empty, at most `maxLength` (default 255) characters, and printable ASCII
 * (0x20–0x7E; a space only inside quotes). Anything else — control characters, non-ASCII, parameters,
 * several keys — gives `none`, which a server answers with 400.
 *
 * @example
 * ```ts
 * import { StructuredFields } from "effect-resilience"
 *
 * StructuredFields.parseIdempotencyKey("\"order-42\"") // Option.some("order-42")
 * StructuredFields.parseIdempotencyKey("8e03978e-40d5-43e8-bc93-6894a57f9324") // Option.some(...)
 * StructuredFields.parseIdempotencyKey("") // Option.none()
 * ```
 *
 * @since 0.1.0
 * @category parsing
 */
export const parseIdempotencyKey: (
  value: string,
  options?: IdempotencyKeyOptions
) => Option.Option<string> = internal.parseIdempotencyKey
