// SPDX-License-Identifier: GPL-2.0
/*
 * tcp_prague: fl's TCP Prague for mainline Linux (7.3 and later: Accurate ECN in the
 * core), written from the IETF draft draft-briscoe-iccrg-prague-congestion-control-01
 * (section numbers below are that revision's) and RFC 9331 (L4S ECN), RFC 9768
 * (AccECN) and RFC 6937 (PRR). It is not the L4STeam kernel fork's tcp_prague, and
 * shares no code with it. Select it as `cc: prague`.
 *
 * What it does (§ of the draft):
 *  - 2.3.1  AccECN is required: the core negotiates it (TCP_CONG_NEEDS_ACCECN, ECT(1) on
 *           the SYN: TCP_CONG_ECT_1_NEGOTIATION) and never falls back to RFC 3168 ECN
 *           (TCP_CONG_NO_FALLBACK_RFC3168). Without AccECN the connection sends Not-ECT
 *           and behaves as Reno (slow start, +1 segment per RTT, halving on loss).
 *  - 2.2    ECT(1) on every packet of an AccECN connection: the core writes ECT(0) on
 *           each segment, so a netfilter LOCAL_OUT hook of this module, registered in
 *           every network namespace, rewrites ECT(0) to ECT(1) for sockets running
 *           prague (IPv4 with its checksum, IPv6), and to Not-ECT without AccECN.
 *  - 2.3.2  alpha, an EWMA (gain 2^-alpha_shift, 1/16) of the fraction of delivered
 *           packets that were CE-marked, once per round trip; set to 1 at the first CE.
 *           (alpha_dctcp=1: kept as mainline DCTCP keeps it instead, in 1024ths rounded
 *           down: an experiment's knob.)
 *  - 2.4.2  on CE, cwnd *= (1 - alpha/2) at once, at most once per round trip (its
 *           fraction kept for the next change); slow start ends at the first CE (2.4.5).
 *  - 2.4.1  on loss, Reno: ssthresh = cwnd/2, the window brought there by PRR. A loss
 *           less than a round trip after a CE cut halves the window the cut started
 *           from (the two reductions together are Reno's half), also when the core
 *           skips .ssthresh because the loss came inside the CE cut's CWR state; PRR
 *           starts afresh there. The same halving answers local congestion (the
 *           sender's own qdisc refused a packet: the core enters CWR without a CE).
 *  - 2.4.3  additive increase on every ACK, CWR included, for packets delivered unmarked.
 *           (ce_prr=1: the cut as mainline DCTCP makes it instead, PRR to the new ssthresh
 *           over the CWR round trip and no increase meanwhile: an experiment's knob.)
 *           (loss_2020=1: the 2020 L4STeam Prague's responses instead, as described from
 *           its v0.5: every cut, CE's and a loss's half, one segment per ACK through a
 *           signed carry, ssthresh = cwnd at each step, no PRR: an experiment's knob.)
 *  - 2.4.4  reduced RTT-dependence (rtt_indep=1): after rtt_indep_rounds round trips the
 *           increase per round trip is (srtt/rtt_virt)^2 segments with rtt_virt =
 *           max(srtt, rtt_virt_us), and alpha and the hold-off after a decrease run per
 *           rtt_virt. Off (0) by default, as the L4S Tests' RTT-unfairness suggests
 *           their 2020 Prague was; both settings are a module parameter away.
 *  - 2.5.1  pacing at max(cwnd, inflight) * MTU / srtt, doubled while cwnd < ssthresh/2,
 *           by sch_fq when the socket's qdisc is fq, by the kernel otherwise.
 *  - 2.5.2  bursts of about burst_us (250 us) of data: sk_pacing_shift sizes each GSO
 *           burst to 2^-shift s of the pacing rate, min_tso_segs lets it be one segment.
 *
 * ss -ti shows it through DCTCP's info struct: "dctcp:(ce_state:S,alpha:A,ab_ecn:E,
 * ab_tot:T)" with A = alpha in 1024ths, E and T the CE-marked and delivered packets
 * since the connection began, S = 1 in the round trip after a decrease; with no
 * AccECN, "dctcp:fallback_mode".
 * Parameters: /sys/module/tcp_prague/parameters/, each with its range (a value outside
 * it is refused, at load time too, and the kernel log says why); those of the window
 * apply from the next round trip, those of pacing and bursts from the next connection.
 * A socket that leaves prague for another congestion control gets back the pacing
 * status and pacing shift it had (.release).
 */
#include <linux/module.h>
#include <linux/netfilter.h>
#include <linux/netfilter_ipv4.h>
#include <linux/netfilter_ipv6.h>
#include <linux/inet_diag.h>
#include <linux/ipv6.h>
#include <linux/log2.h>
#include <net/dsfield.h>
#include <net/inet_ecn.h>
#include <net/net_namespace.h>
#include <net/tcp.h>

#define PRAGUE_VERSION "3"
#define ALPHA_ONE (1U << 20)		/* alpha = 1 */
#define FRAC_ONE (1U << 16)		/* one segment in the window's fraction */
#define DIAG_ALPHA_ONE 1024U		/* DCTCP's scale in ss */

/* A writable unsigned parameter refused outside [lo, hi] (at load time too), the range in
 * its description and, for a refused write, in the kernel log. */
static int prague_param_set(const char *val, const struct kernel_param *kp, unsigned int lo, unsigned int hi)
{
	int err = param_set_uint_minmax(val, kp, lo, hi);

	if (err)
		pr_err("tcp_prague: %s=%.*s refused: a whole number from %u to %u\n",
		       kp->name, (int)strcspn(val, "\n"), val, lo, hi);
	return err;
}

#define PRAGUE_PARAM(name, def, lo, hi, desc)						\
	static unsigned int name __read_mostly = def;					\
	static int name##_set(const char *val, const struct kernel_param *kp)		\
	{										\
		return prague_param_set(val, kp, lo, hi);				\
	}										\
	static const struct kernel_param_ops name##_ops = {				\
		.set = name##_set, .get = param_get_uint,				\
	};										\
	module_param_cb(name, &name##_ops, &name, 0644);				\
	MODULE_PARM_DESC(name, desc " (" #lo "-" #hi ", default " #def ")")

PRAGUE_PARAM(alpha_shift, 4, 1, 16, "EWMA gain of alpha is 2^-alpha_shift (draft: 1/16 = 4)");
PRAGUE_PARAM(rtt_indep, 0, 0, 1, "reduced RTT-dependence (draft 2.4.4): 0 off, 1 on");
PRAGUE_PARAM(rtt_virt_us, 25000, 1000, 1000000, "reference RTT of rtt_indep in us (draft: 25 ms)");
PRAGUE_PARAM(rtt_indep_rounds, 500, 0, 1000000, "round trips before rtt_indep takes effect (draft: 500)");
PRAGUE_PARAM(burst_us, 250, 4, 3906, "data per GSO burst, in us of the pacing rate, from the next connection (draft: 250)");
PRAGUE_PARAM(pacing, 1, 0, 1, "1: the kernel paces (draft 2.5.1); 0: only sch_fq does, if it is the sender's qdisc (from the next connection)");
PRAGUE_PARAM(pacing_ss_pct, 200, 100, 1000, "pacing rate in % of cwnd/srtt while cwnd < ssthresh/2 (draft: 200)");
PRAGUE_PARAM(pacing_ca_pct, 100, 100, 1000, "pacing rate in % of cwnd/srtt otherwise (draft: 100; Linux's own: 120)");
PRAGUE_PARAM(ai_cwnd_limited, 1, 0, 1, "1: additive increase only when the window limited the sending (as Linux's CCs); 0: on every ACK");
PRAGUE_PARAM(alpha_dctcp, 0, 0, 1, "0: alpha with 20 bits; 1: as mainline DCTCP keeps it, in 1024ths rounded down, a round trip without marks clearing it below 16/1024");
PRAGUE_PARAM(ce_prr, 0, 0, 1, "0: the CE cut at once, additive increase through CWR (draft 2.4.2-3); 1: the cut as DCTCP's, PRR to it over the CWR round trip, no increase meanwhile");
PRAGUE_PARAM(loss_2020, 0, 0, 1, "0: the draft's responses; 1: the 2020 L4STeam Prague's as described from its v0.5: CE and loss cuts one segment per ACK through a signed carry (ssthresh = cwnd at each step), a loss not halving ssthresh, no PRR, no growth in loss recovery, slow start back to ssthresh after an RTO");

static char *implementation = "fl tcp_prague " PRAGUE_VERSION
	" (draft-briscoe-iccrg-prague-congestion-control-01)";
module_param(implementation, charp, 0444);
MODULE_PARM_DESC(implementation, "which Prague this is");

struct prague {
	u64 round_start_us;	/* when the current round trip began */
	u64 cut_us;		/* when the window was last cut for CE */
	u32 round_end_seq;	/* the round ends when this is acknowledged */
	u32 cut_end_seq;	/* no further cut before this is acknowledged */
	u32 halved_end_seq;	/* a loss before this is acknowledged is not halved again */
	u32 prior_delivered;	/* tp->delivered and delivered_ce at the last ACK */
	u32 prior_delivered_ce;
	u32 round_delivered;	/* packets delivered, and CE-marked, this round trip */
	u32 round_ce;
	u32 alpha;		/* in ALPHA_ONE units */
	u32 frac;		/* the window's fraction of a segment, in FRAC_ONE units */
	u32 rounds;		/* round trips so far (saturates) */
	u32 saved_ssthresh;	/* ssthresh before the core asked for a new one */
	s64 carry;		/* loss_2020: growth (+) and cuts owed (-), FRAC_ONE units */
	u8 saved_pacing_shift;	/* the socket's own, given back by .release */
	u8 alpha_valid:1,	/* a CE mark was seen: alpha is in use */
	   undone:1,		/* the core undid the last reduction */
	   cut_this_round:1,	/* ss's ce_state */
	   ssthresh_asked:1,	/* the core asked for ssthresh since the last state change */
	   halved:1,		/* halved_end_seq holds */
	   set_pacing:1,	/* init asked the kernel to pace: .release withdraws it */
	   prr_cut:1;		/* ce_prr: this CWR's cut is PRR's, cwnd goes to ssthresh at its end */
};

static struct tcp_congestion_ops prague_ops;

static struct prague *prague_ca(const struct sock *sk)
{
	return inet_csk_ca(sk);
}

static bool prague_accecn(const struct sock *sk)
{
	return tcp_ecn_mode_accecn(tcp_sk(sk));
}

static bool prague_2020(void)
{
	return READ_ONCE(loss_2020);
}

/* The draft's virtual RTT: srtt, or max(srtt, rtt_virt_us) once rtt_indep is in effect. */
static u32 prague_rtt_virt(const struct sock *sk)
{
	u32 srtt = max(tcp_sk(sk)->srtt_us >> 3, 1U);

	if (READ_ONCE(rtt_indep) && prague_ca(sk)->rounds >= READ_ONCE(rtt_indep_rounds))
		return max(srtt, READ_ONCE(rtt_virt_us));
	return srtt;
}

/* Has a virtual RTT passed since SINCE? Always true without rtt_indep: the caller's
 * sequence check already spans a round trip. */
static bool prague_virt_elapsed(const struct sock *sk, u64 since)
{
	const struct tcp_sock *tp = tcp_sk(sk);
	u32 virt = prague_rtt_virt(sk);

	return virt <= (tp->srtt_us >> 3) || tp->tcp_mstamp - since >= virt;
}

/* Additive increase per round trip, in FRAC_ONE units of a segment: 1, or
 * (srtt/rtt_virt)^2 under rtt_indep (2.4.4). */
static u32 prague_ai_per_rtt(const struct sock *sk)
{
	u64 srtt = max(tcp_sk(sk)->srtt_us >> 3, 1U);
	u64 virt = prague_rtt_virt(sk);

	if (!prague_accecn(sk) || virt <= srtt)
		return FRAC_ONE;
	return max_t(u64, div64_u64(FRAC_ONE * srtt * srtt, virt * virt), 1);
}

static void prague_new_round(struct sock *sk)
{
	const struct tcp_sock *tp = tcp_sk(sk);
	struct prague *ca = prague_ca(sk);

	ca->round_end_seq = tp->snd_nxt;
	ca->round_start_us = tp->tcp_mstamp;
	ca->round_delivered = 0;
	ca->round_ce = 0;
	ca->cut_this_round = 0;
	if (ca->rounds < U32_MAX)
		ca->rounds++;
}

static void prague_init(struct sock *sk)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct prague *ca = prague_ca(sk);

	memset(ca, 0, sizeof(*ca));
	ca->prior_delivered = tp->delivered;
	ca->prior_delivered_ce = tp->delivered_ce;
	ca->saved_ssthresh = tp->snd_ssthresh;
	prague_new_round(sk);
	ca->rounds = 0;
	/* a GSO burst holds 2^-shift s of the pacing rate: 2^-12 s = 244 us for 250 us */
	ca->saved_pacing_shift = READ_ONCE(sk->sk_pacing_shift);
	WRITE_ONCE(sk->sk_pacing_shift, order_base_2(USEC_PER_SEC / READ_ONCE(burst_us)));
	if (READ_ONCE(pacing))
		ca->set_pacing = cmpxchg(&sk->sk_pacing_status, SK_PACING_NONE, SK_PACING_NEEDED) == SK_PACING_NONE;
}

/* Another congestion control takes the socket (or it closes): what init changed goes back. */
static void prague_release(struct sock *sk)
{
	struct prague *ca = prague_ca(sk);

	WRITE_ONCE(sk->sk_pacing_shift, ca->saved_pacing_shift);
	if (ca->set_pacing)
		cmpxchg(&sk->sk_pacing_status, SK_PACING_NEEDED, SK_PACING_NONE);
}

/* alpha_dctcp: the same EWMA in 1024ths, each term rounded down as mainline DCTCP's: the
 * decay alpha/2^shift, or all of alpha once that rounds to 0 (so below 2^shift/1024 a round
 * trip without marks clears it), then the marked share's 1024/2^shift. */
static void prague_alpha_coarse(struct prague *ca, u32 shift)
{
	u32 a = ca->alpha >> 10, decay;

	shift = min(shift, 10U);
	decay = a >> shift;
	a -= decay ? decay : a;
	a += div_u64((u64)ca->round_ce << (10 - shift), ca->round_delivered);
	ca->alpha = min(a, 1024U) << 10;
}

/* alpha += g * (frac - alpha), once per round trip (per rtt_virt under rtt_indep). */
static void prague_round_trip(struct sock *sk)
{
	const struct tcp_sock *tp = tcp_sk(sk);
	struct prague *ca = prague_ca(sk);
	u32 shift = READ_ONCE(alpha_shift);
	s64 frac, alpha;

	if (before(tp->snd_una, ca->round_end_seq) || !prague_virt_elapsed(sk, ca->round_start_us))
		return;
	if (ca->alpha_valid && ca->round_delivered && READ_ONCE(alpha_dctcp)) {
		prague_alpha_coarse(ca, shift);
	} else if (ca->alpha_valid && ca->round_delivered) {
		frac = div_u64((u64)ca->round_ce * ALPHA_ONE, ca->round_delivered);
		alpha = ca->alpha;
		alpha += (frac - alpha) >> shift;
		ca->alpha = clamp_t(s64, alpha, 0, ALPHA_ONE);
	}
	prague_new_round(sk);
}

static void prague_set_cwnd(struct tcp_sock *tp, u64 window)
{
	u32 cwnd = clamp_t(u64, window / FRAC_ONE, 2, tp->snd_cwnd_clamp);

	tcp_snd_cwnd_set(tp, cwnd);
}

/* The response to CE (2.4.2): cwnd * (1 - alpha/2), its fraction kept. */
static void prague_cut(struct sock *sk)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct prague *ca = prague_ca(sk);
	u64 window = (u64)tcp_snd_cwnd(tp) * FRAC_ONE + ca->frac;
	u64 cut;

	if (!ca->alpha_valid) {
		ca->alpha = ALPHA_ONE;	/* the first response is the largest (2.3.2) */
		ca->alpha_valid = 1;
	}
	cut = div_u64(window * ca->alpha, 2 * ALPHA_ONE);
	if (prague_2020()) {
		ca->carry -= cut;	/* paid one segment per ACK: prague_pay */
	} else {
		window -= cut;
		ca->frac = window < 2 * FRAC_ONE ? 0 : window % FRAC_ONE;
		ca->prr_cut = READ_ONCE(ce_prr) && inet_csk(sk)->icsk_ca_state == TCP_CA_CWR;
		if (ca->prr_cut)	/* DCTCP's way: PRR takes cwnd there over the CWR round trip */
			tp->snd_ssthresh = max_t(u32, window / FRAC_ONE, 2);
		else
			prague_set_cwnd(tp, window);
		if (!ca->prr_cut)
			tp->snd_ssthresh = tcp_snd_cwnd(tp);	/* and slow start is over (2.4.5) */
	}
	ca->cut_end_seq = tp->snd_nxt;
	ca->cut_us = tp->tcp_mstamp;
	ca->cut_this_round = 1;
}

static bool prague_may_cut(const struct sock *sk)
{
	const struct tcp_sock *tp = tcp_sk(sk);
	const struct prague *ca = prague_ca(sk);

	if (!ca->alpha_valid)
		return true;
	return !before(tp->snd_una, ca->cut_end_seq) && prague_virt_elapsed(sk, ca->cut_us);
}

/* Slow start (applied here), then the additive increase for the packets delivered
 * unmarked that it left (2.4.3), in FRAC_ONE units of a segment, in *ADD: only while the
 * window limits the sending, unless ai_cwnd_limited is 0 (slow start always). False
 * where the window may not grow. */
static bool prague_increase(struct sock *sk, u32 unmarked, u64 *add)
{
	struct tcp_sock *tp = tcp_sk(sk);
	bool limited = tcp_is_cwnd_limited(sk);

	if (!unmarked)
		return false;
	if (tcp_in_slow_start(tp)) {
		if (!limited)
			return false;
		unmarked = tcp_slow_start(tp, unmarked);
		if (!unmarked)
			return false;
	} else if (!limited && READ_ONCE(ai_cwnd_limited)) {
		return false;
	}
	*add = div_u64((u64)unmarked * prague_ai_per_rtt(sk), tcp_snd_cwnd(tp));
	return true;
}

static void prague_grow(struct sock *sk, u32 unmarked)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct prague *ca = prague_ca(sk);
	u64 add;

	if (!prague_increase(sk, unmarked, &add))
		return;
	add += ca->frac;
	prague_set_cwnd(tp, (u64)tcp_snd_cwnd(tp) * FRAC_ONE + add);
	ca->frac = tcp_snd_cwnd(tp) == tp->snd_cwnd_clamp ? 0 : add % FRAC_ONE;
}

/* --- loss_2020: the 2020 L4STeam Prague's responses, written from a description of its
 * v0.5 (not from its code). Every cut, CE's alpha-sized one and a loss's half of the
 * window, is owed into a signed carry and paid one segment per ACK, ssthresh following
 * cwnd at each step; the additive increase goes into the same carry. A loss leaves
 * ssthresh as it was (the core halves nothing), fast recovery has no PRR and no growth;
 * an RTO drops what is owed, and slow start from 2 segments goes back to that ssthresh. */

/* One ACK's change: the whole segments grown, or one segment of what is owed (ssthresh
 * with it); at the 2-segment floor what is still owed is dropped. */
static void prague_pay(struct sock *sk)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct prague *ca = prague_ca(sk);
	u32 cwnd = tcp_snd_cwnd(tp);
	u64 up;

	if (ca->carry >= FRAC_ONE) {
		up = div_u64(ca->carry, FRAC_ONE);
		ca->carry -= up * FRAC_ONE;
		tcp_snd_cwnd_set(tp, min_t(u64, cwnd + up, tp->snd_cwnd_clamp));
		if (tcp_snd_cwnd(tp) == tp->snd_cwnd_clamp)
			ca->carry = 0;
	} else if (ca->carry <= -(s64)FRAC_ONE) {
		if (cwnd <= 2) {
			ca->carry = 0;
			return;
		}
		tcp_snd_cwnd_set(tp, cwnd - 1);
		tp->snd_ssthresh = cwnd - 1;
		ca->carry += FRAC_ONE;
	}
}

static void prague_ack_2020(struct sock *sk, u32 delivered, u32 ce, u8 state)
{
	struct prague *ca = prague_ca(sk);
	u64 add;

	if (state != TCP_CA_Loss && ce && prague_may_cut(sk))
		prague_cut(sk);
	if (state != TCP_CA_Recovery && prague_increase(sk, delivered - ce, &add))
		ca->carry += add;
	prague_pay(sk);
}

/* A loss, or local congestion (CWR without a CE), owes half the window; an RTO (the core
 * has set cwnd to what is in flight + 1) drops what is owed and starts from 2 segments. */
static void prague_set_state_2020(struct sock *sk, u8 old, u8 new_state)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct prague *ca = prague_ca(sk);
	bool local = new_state == TCP_CA_CWR && old < TCP_CA_CWR && tp->delivered_ce == ca->prior_delivered_ce;

	if (new_state == TCP_CA_Loss) {
		ca->carry = 0;
		tcp_snd_cwnd_set(tp, max(tcp_snd_cwnd(tp), 2U));
	} else if ((new_state == TCP_CA_Recovery && old != TCP_CA_Recovery) || local) {
		ca->carry -= (s64)tcp_snd_cwnd(tp) * FRAC_ONE / 2;
	}
}

/* Fast recovery (2.4.1): Reno's ssthresh, reached by proportional rate reduction
 * (RFC 6937, with slow start reduction bound), never below 2 segments. */
static void prague_recovery(struct sock *sk, u32 delivered)
{
	struct tcp_sock *tp = tcp_sk(sk);
	u32 pipe = tcp_packets_in_flight(tp);
	s64 sndcnt;

	if (!tp->prior_cwnd)
		return;
	tp->prr_delivered += delivered;
	if (pipe > tp->snd_ssthresh) {
		sndcnt = div_u64((u64)tp->snd_ssthresh * tp->prr_delivered + tp->prior_cwnd - 1,
				 tp->prior_cwnd) - tp->prr_out;
	} else {
		sndcnt = max_t(s64, (s64)tp->prr_delivered - tp->prr_out, delivered) + 1;
		sndcnt = min_t(s64, (s64)tp->snd_ssthresh - pipe, sndcnt);
	}
	if (!tp->prr_out)
		sndcnt = max_t(s64, sndcnt, 1);	/* the fast retransmit goes now */
	tcp_snd_cwnd_set(tp, max_t(s64, pipe + max_t(s64, sndcnt, 0), 2));
}

/* 2.5.1: max(cwnd, inflight) * MTU / srtt, doubled while cwnd < ssthresh/2. */
static void prague_pace(struct sock *sk)
{
	const struct tcp_sock *tp = tcp_sk(sk);
	u32 srtt = tp->srtt_us >> 3;
	u64 rate;

	if (!srtt)
		return;
	rate = (u64)tcp_mss_to_mtu(sk, tp->mss_cache) *
	       max(tcp_snd_cwnd(tp), tcp_packets_in_flight(tp)) * USEC_PER_SEC;
	rate *= tcp_snd_cwnd(tp) < tp->snd_ssthresh / 2 ? READ_ONCE(pacing_ss_pct)
							: READ_ONCE(pacing_ca_pct);
	rate = div_u64(rate, 100 * srtt);
	WRITE_ONCE(sk->sk_pacing_rate, min_t(u64, rate, READ_ONCE(sk->sk_max_pacing_rate)));
}

static void prague_cong_control(struct sock *sk, u32 ack, int flag, const struct rate_sample *rs)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct prague *ca = prague_ca(sk);
	u32 delivered = tp->delivered - ca->prior_delivered;
	u32 ce = min(tp->delivered_ce - ca->prior_delivered_ce, delivered);
	u8 state = inet_csk(sk)->icsk_ca_state;

	ca->prior_delivered = tp->delivered;
	ca->prior_delivered_ce = tp->delivered_ce;
	if (!prague_accecn(sk))
		ce = 0;
	ca->round_delivered += delivered;
	ca->round_ce += ce;

	if (prague_2020()) {
		prague_ack_2020(sk, delivered, ce, state);
	} else if (state == TCP_CA_Recovery) {
		prague_recovery(sk, delivered);
	} else if (state != TCP_CA_Loss && ce && prague_may_cut(sk)) {
		prague_cut(sk);
		if (ca->prr_cut)
			prague_recovery(sk, delivered);
		else
			prague_grow(sk, delivered - ce);
	} else if (state == TCP_CA_CWR && ca->prr_cut) {
		prague_recovery(sk, delivered);
	} else {
		prague_grow(sk, delivered - ce);
	}
	prague_round_trip(sk);
	prague_pace(sk);
}

/* Reno's response to a loss or to local congestion, now: ssthresh = half of WINDOW, and
 * no second halving for a loss before what is in flight now is acknowledged. */
static void prague_halve(struct sock *sk, u32 window)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct prague *ca = prague_ca(sk);

	tp->snd_ssthresh = max(window >> 1, 2U);
	ca->halved = 1;
	ca->halved_end_seq = tp->snd_nxt;
}

static bool prague_halved_this_round(const struct sock *sk)
{
	const struct prague *ca = prague_ca(sk);

	return ca->halved && before(tcp_sk(sk)->snd_una, ca->halved_end_seq);
}

/* The core asks for ssthresh when it enters CWR (a CE echo, or local congestion), fast
 * recovery or RTO recovery, but not inside a CWR state: Reno's half (prague_set_state
 * puts it back for CE, whose cut is prague_cut's, alpha-sized). */
static u32 prague_ssthresh(struct sock *sk)
{
	const struct tcp_sock *tp = tcp_sk(sk);
	struct prague *ca = prague_ca(sk);

	ca->saved_ssthresh = tp->snd_ssthresh;
	ca->ssthresh_asked = 1;
	if (prague_2020())
		return tp->snd_ssthresh;	/* its cut is owed: prague_set_state_2020 */
	return max(tcp_snd_cwnd(tp) >> 1, 2U);
}

/* Entering CWR: for a CE echo (delivered_ce moved in this ACK) ssthresh goes back, the
 * cut is prague_cut's; without one the sender's own qdisc refused a packet (local
 * congestion): Reno's halving, now. */
static void prague_enter_cwr(struct sock *sk)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct prague *ca = prague_ca(sk);

	if (tp->delivered_ce != ca->prior_delivered_ce) {
		tp->snd_ssthresh = ca->saved_ssthresh;
		return;
	}
	prague_halve(sk, tcp_snd_cwnd(tp));
	tcp_snd_cwnd_set(tp, tp->snd_ssthresh);
	ca->frac = 0;
	ca->cut_end_seq = tp->snd_nxt;	/* the round trip's reduction: no CE cut on top */
	ca->cut_us = tp->tcp_mstamp;
}

/* A loss found inside a CWR state (the core keeps the CWR's ssthresh and PRR counters):
 * half of the window the CWR began with, unless local congestion halved it this round
 * trip; in fast recovery PRR starts afresh, so the fast retransmit goes at once. */
static void prague_loss_in_cwr(struct sock *sk, u8 new_state)
{
	struct tcp_sock *tp = tcp_sk(sk);

	if (!prague_halved_this_round(sk))
		prague_halve(sk, max(tp->prior_cwnd, 2U));
	if (new_state == TCP_CA_Recovery) {
		tp->prior_cwnd = tcp_snd_cwnd(tp);
		tp->prr_delivered = 0;
		tp->prr_out = 0;
	}
}

static void prague_set_state(struct sock *sk, u8 new_state)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct prague *ca = prague_ca(sk);
	u8 old = inet_csk(sk)->icsk_ca_state;
	bool lossy = new_state == TCP_CA_Recovery || new_state == TCP_CA_Loss;

	if (prague_2020()) {
		prague_set_state_2020(sk, old, new_state);
	} else if (new_state == TCP_CA_CWR && old < TCP_CA_CWR) {
		prague_enter_cwr(sk);
	} else if (lossy && old == TCP_CA_CWR && !ca->ssthresh_asked) {
		prague_loss_in_cwr(sk, new_state);
	} else if ((old == TCP_CA_Recovery || (old == TCP_CA_CWR && ca->prr_cut)) && new_state < TCP_CA_CWR) {
		if (!ca->undone && tp->snd_ssthresh < TCP_INFINITE_SSTHRESH)
			tcp_snd_cwnd_set(tp, max(tp->snd_ssthresh, 2U));
		ca->frac = 0;
	}
	if (old == TCP_CA_CWR && new_state != TCP_CA_CWR)
		ca->prr_cut = 0;
	if (lossy)
		ca->undone = 0;
	ca->ssthresh_asked = 0;
}

static u32 prague_undo_cwnd(struct sock *sk)
{
	prague_ca(sk)->undone = 1;
	prague_ca(sk)->carry = 0;	/* loss_2020: the cut undone is owed no more */
	return tcp_reno_undo_cwnd(sk);
}

static u32 prague_min_tso_segs(struct sock *sk)
{
	return 1;	/* low rates send single segments (the burst limit) */
}

static size_t prague_get_info(struct sock *sk, u32 ext, int *attr, union tcp_cc_info *info)
{
	const struct tcp_sock *tp = tcp_sk(sk);
	const struct prague *ca = prague_ca(sk);

	if (!(ext & (1 << (INET_DIAG_DCTCPINFO - 1))) && !(ext & (1 << (INET_DIAG_VEGASINFO - 1))))
		return 0;
	memset(&info->dctcp, 0, sizeof(info->dctcp));
	if (prague_accecn(sk)) {
		info->dctcp.dctcp_enabled = 1;
		info->dctcp.dctcp_ce_state = ca->cut_this_round;
		info->dctcp.dctcp_alpha = div_u64((u64)ca->alpha * DIAG_ALPHA_ONE, ALPHA_ONE);
		info->dctcp.dctcp_ab_ecn = tp->delivered_ce;
		info->dctcp.dctcp_ab_tot = tp->delivered;
	}
	*attr = INET_DIAG_DCTCPINFO;
	return sizeof(info->dctcp);
}

static struct tcp_congestion_ops prague_ops __read_mostly = {
	.init		= prague_init,
	.release	= prague_release,
	.cong_control	= prague_cong_control,
	.ssthresh	= prague_ssthresh,
	.set_state	= prague_set_state,
	.undo_cwnd	= prague_undo_cwnd,
	.min_tso_segs	= prague_min_tso_segs,
	.get_info	= prague_get_info,
	.flags		= TCP_CONG_NON_RESTRICTED | TCP_CONG_NEEDS_ECN | TCP_CONG_NEEDS_ACCECN |
			  TCP_CONG_ECT_1_NEGOTIATION | TCP_CONG_NO_FALLBACK_RFC3168,
	.owner		= THIS_MODULE,
	.name		= "prague",
};

/* --- The codepoint on the wire (2.2, 2.3.1): LOCAL_OUT, every namespace -------------
 * The core writes ECT(0) on every segment of a socket whose congestion control needs ECN
 * (tcp_init_congestion_control does so after prague_init, even when the handshake
 * negotiated no ECN). For prague's sockets this hook makes it ECT(1) when AccECN was
 * negotiated, Not-ECT otherwise. */

/* The codepoint a packet of SKB's socket should carry instead of ECT(0), or -1. */
static int prague_codepoint(const struct sk_buff *skb)
{
	const struct sock *sk = skb->sk;

	if (!sk || !sk_fullsock(sk) || !sk_is_tcp(sk) || READ_ONCE(inet_csk(sk)->icsk_ca_ops) != &prague_ops)
		return -1;
	return prague_accecn(sk) ? INET_ECN_ECT_1 : INET_ECN_NOT_ECT;
}

static unsigned int prague_ecn_v4(void *priv, struct sk_buff *skb, const struct nf_hook_state *state)
{
	int ecn = prague_codepoint(skb);

	if (ecn < 0 || (ip_hdr(skb)->tos & INET_ECN_MASK) != INET_ECN_ECT_0 ||
	    skb_ensure_writable(skb, skb_network_offset(skb) + sizeof(struct iphdr)))
		return NF_ACCEPT;
	ipv4_change_dsfield(ip_hdr(skb), (u8)~INET_ECN_MASK, ecn);
	return NF_ACCEPT;
}

#if IS_ENABLED(CONFIG_IPV6)
static unsigned int prague_ecn_v6(void *priv, struct sk_buff *skb, const struct nf_hook_state *state)
{
	int ecn = prague_codepoint(skb);

	if (ecn < 0 || (ipv6_get_dsfield(ipv6_hdr(skb)) & INET_ECN_MASK) != INET_ECN_ECT_0 ||
	    skb_ensure_writable(skb, skb_network_offset(skb) + sizeof(struct ipv6hdr)))
		return NF_ACCEPT;
	ipv6_change_dsfield(ipv6_hdr(skb), (u8)~INET_ECN_MASK, ecn);
	return NF_ACCEPT;
}
#endif

/* IPv4's hook, then IPv6's where the kernel has IPv6 and it is not disabled at boot
 * (ipv6.disable=1): prague_nhooks of them. */
static const struct nf_hook_ops prague_hooks[] = {
	{ .hook = prague_ecn_v4, .pf = NFPROTO_IPV4, .hooknum = NF_INET_LOCAL_OUT,
	  .priority = NF_IP_PRI_LAST },
#if IS_ENABLED(CONFIG_IPV6)
	{ .hook = prague_ecn_v6, .pf = NFPROTO_IPV6, .hooknum = NF_INET_LOCAL_OUT,
	  .priority = NF_IP6_PRI_LAST },
#endif
};

static unsigned int prague_nhooks __read_mostly;

static int __net_init prague_net_init(struct net *net)
{
	return nf_register_net_hooks(net, prague_hooks, prague_nhooks);
}

static void __net_exit prague_net_exit(struct net *net)
{
	nf_unregister_net_hooks(net, prague_hooks, prague_nhooks);
}

static struct pernet_operations prague_net_ops = {
	.init = prague_net_init,
	.exit = prague_net_exit,
};

static int __init prague_register(void)
{
	int err;

	BUILD_BUG_ON(sizeof(struct prague) > ICSK_CA_PRIV_SIZE);
	prague_nhooks = ipv6_mod_enabled() ? ARRAY_SIZE(prague_hooks) : 1;
	err = register_pernet_subsys(&prague_net_ops);
	if (err)
		return err;
	err = tcp_register_congestion_control(&prague_ops);
	if (err)
		unregister_pernet_subsys(&prague_net_ops);
	return err;
}

static void __exit prague_unregister(void)
{
	tcp_unregister_congestion_control(&prague_ops);
	unregister_pernet_subsys(&prague_net_ops);
}

module_init(prague_register);
module_exit(prague_unregister);

MODULE_LICENSE("GPL");
MODULE_VERSION(PRAGUE_VERSION);
MODULE_DESCRIPTION("TCP Prague (L4S) after draft-briscoe-iccrg-prague-congestion-control-01, fl's own");
