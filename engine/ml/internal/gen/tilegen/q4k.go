package main

func genQ4K() {
	T(q4kIntro)
	expandQ4KLike("Q4K", "eq4kloop", false)
	T(q5kIntro)
	expandQ4KLike("Q5K", "eq5kloop", true)
	gemmK(q4kLayout, 4)
	gemmK(q4kLayout, 8)
}
