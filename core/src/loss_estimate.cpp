#include "sp/loss_estimate.h"

namespace sp {

double loss_change_estimate(const double* error, const float* grad, std::size_t tokens, std::size_t rows,
                            std::size_t rows_total, double batch_tokens) {
    if (tokens == 0 || rows == 0) return 0.0;
    const double n = double(rows), all = double(rows_total);
    const bool every_row = rows >= rows_total;
    double sum = 0;  // of the tokens' estimated (g . e)^2
    for (std::size_t t = 0; t < tokens; ++t) {
        double dot = 0, squares = 0;
        for (std::size_t r = 0; r < rows; ++r) {
            const double a = double(grad[t * rows + r]) * error[t * rows + r];
            dot += a;
            squares += a * a;
        }
        if (every_row)
            sum += dot * dot;
        else if (rows == 1)
            sum += all * squares;  // one row sampled: no pair to estimate the cross terms from
        else
            sum += all / n * squares + all * (all - 1.0) / (n * (n - 1.0)) * (dot * dot - squares);
    }
    return 0.5 * batch_tokens * (batch_tokens / double(tokens)) * sum;
}

}  // namespace sp
