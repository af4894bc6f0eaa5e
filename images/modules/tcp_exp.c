// SPDX-License-Identifier: GPL-2.0
/*
 * tcp_exp: the "exp" congestion control of the GENI TCP lab (seed 002, experiment 9),
 * fl's example of a module built into an image (images/geni.yml). It is Reno with two
 * knobs, module parameters (/sys/module/tcp_exp/parameters/):
 *   ss_factor  slow start multiplies the window by this per round trip (Reno: 2; default 3)
 *   beta       after a loss the window becomes beta/1024 of what it was (Reno: 512;
 *              default 768, i.e. 3/4)
 * Select it like any congestion control: cc: exp in a scenario.
 */
#include <linux/module.h>
#include <net/tcp.h>

static unsigned int ss_factor __read_mostly = 3;
module_param(ss_factor, uint, 0644);
MODULE_PARM_DESC(ss_factor, "window growth factor per round trip in slow start (Reno: 2)");

static unsigned int beta __read_mostly = 768;
module_param(beta, uint, 0644);
MODULE_PARM_DESC(beta, "window after a loss, in 1024ths of the window before it (Reno: 512)");

/* Slow start: each acknowledged segment adds ss_factor - 1 segments, so the window grows
 * by ss_factor per round trip; beyond ssthresh, Reno's additive increase. */
static void exp_cong_avoid(struct sock *sk, u32 ack, u32 acked)
{
	struct tcp_sock *tp = tcp_sk(sk);
	u32 per_ack = max(ss_factor, 2U) - 1;

	if (!tcp_is_cwnd_limited(sk))
		return;
	if (tcp_in_slow_start(tp)) {
		acked = tcp_slow_start(tp, acked * per_ack) / per_ack;
		if (!acked)
			return;
	}
	tcp_cong_avoid_ai(tp, tcp_snd_cwnd(tp), acked);
}

/* Multiplicative decrease to beta/1024 of the window (at least 2 segments). */
static u32 exp_ssthresh(struct sock *sk)
{
	const struct tcp_sock *tp = tcp_sk(sk);

	return max((tcp_snd_cwnd(tp) * min(beta, 1024U)) >> 10, 2U);
}

static struct tcp_congestion_ops tcp_exp __read_mostly = {
	.ssthresh	= exp_ssthresh,
	.cong_avoid	= exp_cong_avoid,
	.undo_cwnd	= tcp_reno_undo_cwnd,
	.owner		= THIS_MODULE,
	.name		= "exp",
};

static int __init tcp_exp_register(void)
{
	return tcp_register_congestion_control(&tcp_exp);
}

static void __exit tcp_exp_unregister(void)
{
	tcp_unregister_congestion_control(&tcp_exp);
}

module_init(tcp_exp_register);
module_exit(tcp_exp_unregister);

MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("TCP exp: Reno with a tunable slow-start factor and decrease (GENI TCP lab)");
