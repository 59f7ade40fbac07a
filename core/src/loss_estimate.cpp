#include "sp/loss_estimate.h"

namespace sp {
namespace {

// One token's estimated (g . e)^2 from its sampled rows' D = sum a_r and sum a_r^2 (n of R rows).
double token_square(double dot, double squares, std::size_t rows, std::size_t rows_total) {
    const double n = double(rows), all = double(rows_total);
    if (rows >= rows_total) return dot * dot;
    if (rows == 1) return all * squares;  // one row sampled: no pair to estimate the cross terms from
    return all / n * squares + all * (all - 1.0) / (n * (n - 1.0)) * (dot * dot - squares);
}

// 1/2 N (N / tokens) times the tokens' sum.
double scaled(double sum, std::size_t tokens, double batch_tokens) {
    return 0.5 * batch_tokens * (batch_tokens / double(tokens)) * sum;
}

}  // namespace

double loss_change_estimate(const double* error, const float* grad, std::size_t tokens, std::size_t rows,
                            std::size_t rows_total, double batch_tokens) {
    if (tokens == 0 || rows == 0) return 0.0;
    double sum = 0;  // of the tokens' estimated (g . e)^2
    for (std::size_t t = 0; t < tokens; ++t) {
        double dot = 0, squares = 0;
        for (std::size_t r = 0; r < rows; ++r) {
            const double a = double(grad[t * rows + r]) * error[t * rows + r];
            dot += a;
            squares += a * a;
        }
        sum += token_square(dot, squares, rows, rows_total);
    }
    return scaled(sum, tokens, batch_tokens);
}

double loss_change_from_token_sums(const double* dot, const double* squares, std::size_t tokens,
                                   std::size_t rows, std::size_t rows_total, double batch_tokens) {
    if (tokens == 0 || rows == 0) return 0.0;
    double sum = 0;
    for (std::size_t t = 0; t < tokens; ++t) sum += token_square(dot[t], squares[t], rows, rows_total);
    return scaled(sum, tokens, batch_tokens);
}

}  // namespace sp
