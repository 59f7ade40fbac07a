#pragma once
// The loss-change estimate of one linear layer in one format (POLICY.md rule 23; NVIDIA Model
// Optimizer's AutoQuantize score, taken online): the second-order Taylor term of the loss with the
// empirical Fisher in place of the Hessian,
//   delta_loss ~= 1/2 N sum over the batch's N tokens t of (g_t . e_t)^2,
// where e_t = y_f - y is the token's output error in the format and g_t the gradient of the (mean)
// training loss at the layer's output y_t. The N makes the mean loss's 1/N per-token gradients into
// the per-token losses' own (1/2 (1/N) sum (N g_t . e_t)^2). The first-order term, sum g_t . e_t,
// averages to zero for rounding noise and is left out.
//
// Sampled: the distribution statistics hold `tokens` sampled tokens and, of a layer with more than
// that many, `rows` sampled output rows of `rows_total`. The token sum is scaled by N / tokens. The
// square of the full dot product over every row, (sum_r a_r)^2 with a_r = g_r e_r, is estimated
// without bias from the sampled rows: (R/n) sum a_r^2 + R(R-1) / (n(n-1)) (D^2 - sum a_r^2), with D
// the sampled rows' sum, n of R sampled without replacement; with every row sampled it is D^2.
#include <cstddef>

namespace sp {

// `error` and `grad`: [tokens x rows], token-major, for the same tokens and output rows.
// `batch_tokens`: N, the tokens of the batch the gradient was taken on.
double loss_change_estimate(const double* error, const float* grad, std::size_t tokens, std::size_t rows,
                            std::size_t rows_total, double batch_tokens);

// The same from each token's sums over its sampled rows, a_r = g_r e_r: `dot`[t] = sum a_r (D) and
// `squares`[t] = sum a_r^2, for a caller that reduced them where the operands live (the agent's
// device path) and copied only those.
double loss_change_from_token_sums(const double* dot, const double* squares, std::size_t tokens,
                                   std::size_t rows, std::size_t rows_total, double batch_tokens);

}  // namespace sp
